"""What a refused connect says: one line that points at the fix."""

from __future__ import annotations

import pytest

from voxline.realtime.errors import ConnectionFailed
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.transports.failures import connect_failure, error_detail, http_status
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession


def test_a_refused_token_with_a_key_in_the_query_says_that_key_is_not_the_token() -> None:
    for url in ("ws://127.0.0.1:8765/v1/realtime?model=m&api-key=[redacted]",
                "wss://example.test/v1/realtime?api_key=x&model=m", "ws://h/v1/realtime?token=t"):
        line = http_status(url, 401)
        shown = url.replace("api_key=x", "api_key=[redacted]").replace("token=t", "token=[redacted]")
        assert line.startswith(f"HTTP 401 from {shown}: the token was refused")
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


@pytest.mark.parametrize(("api", "transport"), [("realtime", "ws"), ("realtime", "webrtc"), ("live", "ws"),
                                              ("live", "webrtc")])
async def test_a_server_on_this_machine_that_asks_for_a_key_when_none_was_given_says_so(api: str, transport: str) -> None:
    """No key, a loopback URL: the placeholder such a server takes is sent. One that asks for a key refuses it, and
    the error says no key was given (before: "the token was refused", of a token the user never gave)."""
    async with serve(ServerConfig(port=0, voice="tone", api_key="sk-serve-key-1234")) as server:
        for key, said in ((None, True), ("sk-wrong-key-5678", False)):
            settings = SessionSettings(url=server.url, api_key=key, api=api, transport=transport,
                                       turn_detection="none")
            with pytest.raises(ConnectionFailed) as refused:
                async with VoiceSession(settings):
                    pass
            message = str(refused.value)
            assert "HTTP 401" in message and "sk-" not in message
            asked = "this server asks for an API key, and none was given: set VOXLINE_API_KEY or OPENAI_API_KEY"
            assert (asked in message) is said, message
            assert ("the token was refused" in message) is not said, message


def test_a_404_for_a_sideband_says_the_call_is_unknown_not_that_the_url_is_wrong() -> None:
    sideband = http_status("ws://127.0.0.1:8765/v1/realtime?call_id=rtc_nope", 404)
    assert sideband.endswith(": no such call (it ended, or was never made)") and "not a Realtime endpoint" not in sideband
    assert "not a Realtime endpoint" in http_status("ws://127.0.0.1:8765/v1/realtime?model=m", 404)


def test_a_url_or_a_server_message_in_a_failure_is_one_short_line_a_terminal_shows_as_it_reads() -> None:
    """A call id of 20,000 characters made a failure as long; one holding an escape sequence, or a server's message
    echoing it, put that sequence in the exception, for the terminal that shows it to obey."""
    long = http_status("ws://127.0.0.1:8765/v1/realtime?call_id=" + "x" * 20_000, 400)
    assert long.startswith("HTTP 400 from ws://127.0.0.1:8765/v1/realtime?call_id=xxx") and long.endswith("…")
    assert len(long) < 260
    coloured = http_status("ws://h/v1/realtime?call_id=\x1b[31mred", 404)
    assert "\x1b" not in coloured and "\\x1b[31mred" in coloured
    assert error_detail(b'{"error": {"message": "Call \'\\u001b[31mred\' not found."}}') == (
        ": Call '\\x1b[31mred' not found.")
    assert "\x1b" not in connect_failure("ws://h:1/v1?x=\x1b[2J", ConnectionRefusedError())
