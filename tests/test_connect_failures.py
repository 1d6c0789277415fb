"""What a refused connect says: one line that points at the fix."""

from __future__ import annotations

from voxline.realtime.transports.failures import connect_failure, http_status


def test_a_refused_token_with_a_key_in_the_query_says_that_key_is_not_the_token() -> None:
    for url in ("ws://127.0.0.1:8765/v1/realtime?model=m&api-key=[redacted]",
                "wss://example.test/v1/realtime?api_key=x&model=m", "ws://h/v1/realtime?token=t"):
        line = http_status(url, 401)
        assert line.startswith(f"HTTP 401 from {url}: the token was refused")
        assert "a key in the URL's query is not the token" in line and "user:KEY@" in line
    plain = http_status("ws://127.0.0.1:8765/v1/realtime?model=m", 403)
    assert plain == "HTTP 403 from ws://127.0.0.1:8765/v1/realtime?model=m: the token was refused"


def test_a_connect_that_times_out_over_tls_suggests_a_plain_server() -> None:
    """A plain server (``voxline serve``) takes a TLS hello for the start of a request and never answers it."""
    assert connect_failure("wss://127.0.0.1:8765/v1/realtime", TimeoutError()) == (
        "cannot connect to wss://127.0.0.1:8765/v1/realtime: no answer in time (connect timed out; if it is a "
        "plain ws:// server, such as `voxline serve`, use ws://)")
    assert connect_failure("ws://127.0.0.1:8765/v1/realtime", TimeoutError()) == (
        "cannot connect to ws://127.0.0.1:8765/v1/realtime: no answer in time (connect timed out)")
