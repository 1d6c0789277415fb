"""Keys stay home: no redirect carries the Authorization header to another host, and a canary
key shows up in no log (ours or websockets' at DEBUG), repr, exception, event or event log.

The canary has no known prefix (not ``sk-``, not ``ek_``): only redaction of the key actually
in use can catch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import io
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.server import serve as ws_serve

from voxline.base.clock import VirtualClock
from voxline.base.redaction import LOGGERS, RedactingFilter, forget_secret, redact, register_secret, scrub
from voxline.realtime.errors import ConnectionFailed, ServerError
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.http_api import Credentials
from voxline.realtime.server.engine.http_message import HttpRequest
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.transports.rtc_signaling import post_offer
from voxline.realtime.transports.websocket import WebSocketTransport
from voxline.session.cli import main
from voxline.session.eventlog import EventLog
from voxline.session.events import CODE_CHARS, MESSAGE_CHARS, ResponseFinished, SessionError
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.loopback_http import loopback_http
from tests.support.session_events import collect

CANARY = "canary7Qx2-Lm9Zt4Wv8Rb3Kc6"


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    """Each test proves its own redaction: the canary is not known before the code under test sees it."""
    forget_secret(CANARY)
    yield
    forget_secret(CANARY)


# ---------------------------------------------------------------- redirects


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records every request it gets (the second host of a redirect) and answers 404."""

    protocol_version = "HTTP/1.1"  # websockets reads only HTTP/1.1 answers
    seen: list[dict[str, str]]

    def _record(self) -> None:
        self.seen.append({"line": self.requestline, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _record

    def log_message(self, *args: Any) -> None:
        pass


def _redirector(status: int, target: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Redirect(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _redirect(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _redirect

        def log_message(self, *args: Any) -> None:
            pass

    return Redirect


@contextlib.contextmanager
def redirect_to_second_host(status: int, scheme: str = "http") -> Iterator[tuple[int, list[dict[str, str]]]]:
    """Host A answers every request with ``status`` pointing at host B; B records what it gets."""
    seen: list[dict[str, str]] = []
    recorder = type("Recorder", (_Recorder,), {"seen": seen})
    with loopback_http(recorder) as port_b, loopback_http(_redirector(status, f"{scheme}://127.0.0.1:{port_b}")) as port_a:
        yield port_a, seen


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_websocket_connect_does_not_follow_a_redirect_to_another_host(status: int) -> None:
    with redirect_to_second_host(status, "ws") as (port_a, seen_by_b):
        with pytest.raises(ConnectionFailed) as failure:
            await WebSocketTransport.connect(f"ws://127.0.0.1:{port_a}/v1", CANARY, open_timeout=5)
    assert seen_by_b == []
    assert f"HTTP {status}" in str(failure.value) and "redirect" in str(failure.value)
    assert CANARY not in str(failure.value)


async def test_websocket_connect_still_follows_a_redirect_within_its_origin() -> None:
    async def handler(ws: Any) -> None:
        await ws.send(json.dumps({"type": "session.created", "event_id": "e", "session": {}}))
        await ws.wait_closed()

    def moved(connection: Any, request: Any) -> Any:
        if request.path.startswith("/old/"):
            response = connection.respond(302, "")
            response.headers["Location"] = "/v1/" + request.path[len("/old/"):]
            return response
        return None

    async with ws_serve(handler, "127.0.0.1", 0, process_request=moved) as same:
        port = same.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/old", CANARY, open_timeout=5)
        assert json.loads(await transport.recv())["type"] == "session.created"
        assert transport._ws.request is not None and transport._ws.request.path.startswith("/v1/realtime")
        await transport.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_webrtc_offer_is_not_posted_or_redirected_to_another_host(status: int) -> None:
    with redirect_to_second_host(status) as (port_a, seen_by_b):
        with pytest.raises(ConnectionFailed) as failure:
            await post_offer(f"http://127.0.0.1:{port_a}/v1/realtime/calls", CANARY, "v=0\r\n", timeout=5)
    assert seen_by_b == []
    assert "redirect" in str(failure.value) and CANARY not in str(failure.value)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_voxline_token_does_not_send_the_key_to_a_redirect_target(
    status: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    with redirect_to_second_host(status) as (port_a, seen_by_b):
        code = main(["token", "--url", f"http://127.0.0.1:{port_a}/v1"])
    out, err = capsys.readouterr()
    assert seen_by_b == []
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "redirect" in err and CANARY not in err


# ---------------------------------------------------------------- redaction, unit level


def test_redact_removes_registered_keys_of_any_shape_and_known_shapes() -> None:
    assert CANARY in redact(f"Incorrect API key provided: {CANARY}.")
    register_secret(CANARY)
    assert redact(f"Incorrect API key provided: {CANARY}.") == "Incorrect API key provided: [redacted]."
    for text in ["Authorization: Bearer abc.DEF-123", "api_key=hunter2hunter2", '{"client_secret": "xyz987654"}',
                 "sk-proj-AbCdEf123456", "ek_68af2b9c1d", "openai-insecure-api-key.zzz999"]:
        cleaned = redact(text)
        assert "[redacted]" in cleaned
        assert not any(secret in cleaned for secret in ["abc.DEF", "hunter2", "xyz987", "AbCdEf", "68af2b", "zzz999"])
    for harmless in ["max_output_tokens: 4096, the token was refused",
                     "Missing bearer or basic authentication in header", "a Basic idea", "the bearer token"]:
        assert redact(harmless) == harmless


def test_a_key_the_service_masked_when_it_refused_it_is_redacted_whole() -> None:
    """The service echoes a refused key with its middle starred out; the ends it leaves are the key's."""
    refusals = {
        "Incorrect API key provided: sk-proj-****************************************Wx9q. You can find": "Wx9q",
        "Incorrect API key provided: zq7T************************mK2p.": "mK2p",
        "Incorrect API key provided: ek_68af****2b9c.": "2b9c",
    }
    for text, tail in refusals.items():
        cleaned = redact(text)
        assert "[redacted]" in cleaned and tail not in cleaned and "****" not in cleaned, cleaned
        assert cleaned.startswith("Incorrect API key provided: [redacted]")
    for harmless in ["a ***** rating", "**bold** and ****", "x****y"]:
        assert redact(harmless) == harmless


def test_short_values_are_not_registered() -> None:
    register_secret("local")  # the built-in server takes any token; redacting "local" would garble text
    assert redact("the local server") == "the local server"


def test_log_filter_redacts_message_arguments_and_traceback() -> None:
    register_secret(CANARY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("voxline.test_secrets")
    logger.addFilter(RedactingFilter())
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("> %s: %s", "Authorization", f"Bearer {CANARY}")
        try:
            raise RuntimeError(f"echoed {CANARY}")
        except RuntimeError:
            logger.exception("failed with %s", CANARY)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "Authorization: Bearer [redacted]" in text and "RuntimeError: echoed [redacted]" in text
    assert CANARY not in text


def test_credential_objects_do_not_show_keys_in_repr() -> None:
    credentials = Credentials(CANARY, IdFactory(1))
    value, _ = credentials.mint(60, {"type": "realtime"}, 0.0)
    request = HttpRequest("POST", "/v1/realtime/calls", "", {"authorization": f"Bearer {CANARY}"}, b"v=0")
    settings = SessionSettings(api_key=CANARY)
    config = ServerConfig(port=0, api_key=CANARY)
    for obj in (credentials, request, settings, config):
        assert CANARY not in repr(obj) and value not in repr(obj)
    assert CANARY not in str(ServerError(f"bad key {CANARY}"))  # the server registered it


# ---------------------------------------------------------------- a whole session at DEBUG


@contextlib.contextmanager
def debug_logs() -> Iterator[io.StringIO]:
    """Every record of every logger, at DEBUG, formatted with tracebacks, into one string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    levels = {name: logging.getLogger(name).level for name in LOGGERS}
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


async def test_canary_key_never_appears_in_a_debug_session() -> None:
    """A session against the local server (which requires the canary) at DEBUG everywhere."""
    log = io.StringIO()
    clock = VirtualClock()
    with debug_logs() as logs:
        async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"), api_key=CANARY)) as srv:
            settings = SessionSettings(url=srv.url, api_key=CANARY, turn_detection="none")
            events = EventLog(log, clock.now)
            session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, on_wire=events.wire)
            async with session:
                await session.send_text(f"my key is not {CANARY[:6]}, say hello")
                seen = await collect(session, clock, lambda e: isinstance(e, ResponseFinished))
                reprs = [repr(session), repr(session.settings), repr(srv.config), repr(session._link.conn)]
            events.close()  # lines wait for their moment's wire frames; close writes the rest
    text = logs.getvalue()
    # the test looks where the key would be: websockets logged both ends of the handshake
    assert "websockets.client DEBUG > Authorization: Bearer [redacted]" in text
    assert "websockets.server DEBUG < Authorization: Bearer [redacted]" in text
    assert "response.done" in log.getvalue()
    for where, content in [("logs", text), ("event log", log.getvalue()), ("reprs", " ".join(reprs)),
                           ("events", " ".join(map(repr, seen)))]:
        assert CANARY not in content, where


async def _until_fatal_against(hostile: Callable[[Any], Awaitable[None]], log: io.StringIO | None = None
                               ) -> tuple[list[object], io.StringIO]:
    """A session with the key :data:`CANARY` against the WebSocket server ``hostile``, until a fatal error: what it
    saw, and every log record meanwhile at DEBUG. With ``log``, an event log of it too (its last event included)."""
    clock = VirtualClock()
    with debug_logs() as logs:
        async with ws_serve(hostile, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            settings = SessionSettings(url=f"ws://127.0.0.1:{port}/v1", api_key=CANARY, turn_detection="none",
                                       reconnect_attempts=0)
            events = EventLog(log, clock.now) if log is not None else None
            session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock,
                                   on_wire=events.wire if events is not None else None)
            async with session:
                seen = await collect(session, clock, lambda e: isinstance(e, SessionError) and e.fatal)
                if events is not None:
                    events.local(seen[-1])
            if events is not None:
                events.close()
    return seen, logs


async def test_a_server_echoing_the_key_in_errors_and_close_reasons_never_surfaces_it() -> None:
    """A hostile server puts the key into an error message, its param and the close reason."""
    async def hostile(ws: Any) -> None:
        await ws.send(json.dumps({"type": "session.created", "event_id": "event_1", "session": {"type": "realtime"}}))
        await ws.recv()  # the client's session.update
        await ws.send(json.dumps({"type": "error", "event_id": "event_2", "error": {
            "type": "invalid_request_error", "code": "invalid_api_key", "param": CANARY,
            "message": f"Incorrect API key provided: {CANARY}. You can find your API key in your account.",
            "event_id": None}}))
        await ws.close(3000, f"invalid_request_error.invalid_api_key {CANARY}")

    log = io.StringIO()
    seen, logs = await _until_fatal_against(hostile, log)
    errors = [e for e in seen if isinstance(e, SessionError)]
    assert any("Incorrect API key provided: [redacted]" in e.message for e in errors)
    assert "Incorrect API key provided: [redacted]" in log.getvalue()
    for where, content in [("logs", logs.getvalue()), ("event log", log.getvalue()),
                           ("events", " ".join(map(repr, seen)))]:
        assert CANARY not in content, where


def test_session_errors_and_logged_error_events_are_redacted() -> None:
    register_secret(CANARY)
    assert SessionError(f"server: Incorrect API key provided: {CANARY}").message == (
        "server: Incorrect API key provided: [redacted]"
    )
    log = io.StringIO()
    frame = {"type": "error", "event_id": "e", "error": {"type": "invalid_request_error", "code": None,
             "message": "key sk-live-0123456789abcdef and Bearer zzzz9999 rejected", "param": None}}
    event_log = EventLog(log, lambda: 0.0)
    event_log.wire("in", json.dumps(frame))
    event_log.close()
    assert "0123456789abcdef" not in log.getvalue() and "zzzz9999" not in log.getvalue()
    assert json.loads(log.getvalue())["event"]["error"]["message"] == "key [redacted] and Bearer [redacted] rejected"


async def test_canary_key_never_appears_in_a_debug_webrtc_call() -> None:
    from voxline.realtime.connection import RealtimeConnection
    from voxline.realtime.transports.webrtc import WebRTCTransport

    log = io.StringIO()
    with debug_logs() as logs:
        async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"), api_key=CANARY)) as srv:
            transport = await WebRTCTransport.connect(srv.http_url, CANARY)
            events = EventLog(log, lambda: 0.0)
            async with RealtimeConnection(transport, on_wire=events.wire) as conn:
                conn.protocol.update_session({"type": "realtime", "instructions": "Be brief."})
                await conn.flush()
                async with asyncio.timeout(10):
                    while getattr(await conn.recv(), "type", None) != "session.updated":
                        pass
                reprs = [repr(conn), repr(transport), repr(srv._calls), repr(srv._credentials)]
            events.close()
    assert "session.updated" in log.getvalue() and "aiortc" in logs.getvalue()  # both were looked at
    for name in ("aiortc.rtcpeerconnection", "aiortc.rtcdtlstransport", "aioice.ice", "websockets.client"):
        assert any(isinstance(f, RedactingFilter) for f in logging.getLogger(name).filters), name
    for where, content in [("logs", logs.getvalue()), ("event log", log.getvalue()), ("reprs", " ".join(reprs))]:
        assert CANARY not in content, where


def _refusing_with_the_key() -> type[http.server.BaseHTTPRequestHandler]:
    """An HTTP peer that answers every GET or POST with 401 and a JSON error echoing the key it was sent."""
    class Echo(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _refuse(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {token}", "code": "invalid_api_key",
                                         "type": "invalid_request_error", "param": None}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _refuse

        def log_message(self, *args: Any) -> None:
            pass

    return Echo


def test_an_offer_refusal_echoing_the_key_is_redacted() -> None:
    Echo = _refusing_with_the_key()

    with loopback_http(Echo) as port:
        with pytest.raises(ConnectionFailed) as failure:
            asyncio.run(post_offer(f"http://127.0.0.1:{port}/v1/realtime/calls", CANARY, "v=0\r\n", timeout=5))
    assert "HTTP 401" in str(failure.value) and "Incorrect API key provided: [redacted]" in str(failure.value)
    assert failure.value.__context__ is None  # raised outside the handler: no library exception kept
    assert CANARY not in str(failure.value)


def test_a_short_token_is_not_scrubbed_from_what_the_server_says() -> None:
    """The loopback server takes any token, e.g. "local"; the word must survive in transcripts."""
    from voxline.base.redaction import scrub

    assert scrub("the voxline local server", "local") == "the voxline local server"
    assert scrub(f"bad key {CANARY}", CANARY) == "bad key [redacted]"


# ---------------------------------------------------------------- seams: URLs, settings, odd keys, the log


def test_settings_show_no_secret_a_url_carries() -> None:
    url = f"ws://user:{CANARY}@127.0.0.1:1/v1?api-key={CANARY}x&model=m#key={CANARY}y"
    settings = SessionSettings(url=url, api_key="placeholder-key")
    for shown in (repr(settings), str(settings)):
        assert CANARY not in shown and "url='ws://[redacted]@127.0.0.1:1/v1?api-key=[redacted]&model=m#[redacted]'" in shown
    assert settings.url == url  # the value itself is untouched


@pytest.mark.parametrize("url", [f"{CANARY}@127.0.0.1:1/v1", f"u:{CANARY}@127.0.0.1:1/v1",
                                 f"ws://127.0.0.1:1/v1#key={CANARY}", f"ws://127.0.0.1:1/v1?key={CANARY}"])
def test_a_url_without_a_scheme_or_with_a_fragment_is_redacted_and_its_key_registered(url: str) -> None:
    from voxline.base.redaction import redact_url, register_url_secrets

    assert CANARY not in redact_url(url)
    register_url_secrets(url)
    assert CANARY not in redact(f"the server said {CANARY}")


def test_keys_in_use_stay_redacted_however_many_ephemeral_keys_come_after() -> None:
    register_secret(CANARY)
    for k in range(200):  # minted ephemeral keys: their prefix gives them away, they take no place
        register_secret(f"ek_{k:08d}abcdefgh")
    others = [f"other-key-{k:04d}-abcdefgh" for k in range(63)]
    for other in others:  # keys of another shape, fewer than the kept number after the canary...
        register_secret(other)
    register_secret(CANARY)  # ...and the canary registered again, as each connect does
    for other in [f"more-keys-{k:04d}-abcdefgh" for k in range(63)]:
        register_secret(other)
    try:
        assert redact(f"key {CANARY}") == "key [redacted]"
    finally:
        for value in others:
            forget_secret(value)
        for k in range(63):
            forget_secret(f"more-keys-{k:04d}-abcdefgh")


def test_a_key_with_spaces_around_is_sent_and_redacted_trimmed_and_a_line_break_refused() -> None:
    from voxline.realtime.errors import ConfigurationError
    from voxline.realtime.transports.http import bearer_token

    assert bearer_token(f"  {CANARY} \n", "ws://h/v1") == CANARY
    assert redact(f"Incorrect API key provided: {CANARY}.") == "Incorrect API key provided: [redacted]."
    with pytest.raises(ConfigurationError) as refused:
        bearer_token(f"{CANARY}\r\nX-Evil: injected", "ws://h/v1")
    assert CANARY not in str(refused.value) and "control character" in str(refused.value)


async def test_a_refused_handshake_keeps_no_library_exception_that_holds_the_echoed_key() -> None:
    Echo = _refusing_with_the_key()

    with loopback_http(Echo) as port:
        with pytest.raises(ConnectionFailed) as failed:
            await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", CANARY, open_timeout=5)
    assert failed.value.__context__ is None and failed.value.__cause__ is None
    assert CANARY not in str(failed.value)


async def test_a_key_in_the_urls_query_is_redacted_in_a_library_session() -> None:
    """No CLI in between: the session's own connection registers what its URL carries."""
    async def hostile(ws: Any) -> None:
        await ws.send(json.dumps({"type": "session.created", "event_id": "event_1", "session": {"type": "realtime"}}))
        await ws.recv()
        await ws.send(json.dumps({"type": "error", "event_id": "event_2", "error": {
            "type": "invalid_request_error", "code": "invalid_api_key", "param": None,
            "message": f"Invalid api-key {CANARY}", "event_id": None}}))
        await ws.close(3000, f"bad key {CANARY}")

    clock = VirtualClock()
    with debug_logs() as logs:
        async with ws_serve(hostile, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            settings = SessionSettings(url=f"ws://127.0.0.1:{port}/v1?api-key={CANARY}", api_key="placeholder-key",
                                       turn_detection="none", reconnect_attempts=0)
            session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock)
            async with session:
                seen = await collect(session, clock, lambda e: isinstance(e, SessionError) and e.fatal)
    assert any("Invalid api-key [redacted]" in e.message for e in seen if isinstance(e, SessionError))
    assert CANARY not in logs.getvalue() and CANARY not in " ".join(map(repr, seen))


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_a_key_echoed_in_json_escapes_is_scrubbed_from_the_frame_and_the_frame_means_the_same() -> None:
    """Before, only the key's own text was looked for: an echo spelt as \\u00XX escapes parsed back to the key, and
    reached the events' text, their codes and ids."""
    # the key escaped; an escaped quote; an escaped backslash before "u0061" (text, no escape); an escaped é
    frame = '{"type": "error", "message": "bad key %s, \\"quoted\\" \\\\u0061 é \\u00e9"}' % _escaped(CANARY)
    scrubbed = json.loads(scrub(frame, CANARY))
    assert scrubbed["message"] == 'bad key [redacted], "quoted" \\u0061 é é'
    mixed = f"{CANARY[:5]}{_escaped(CANARY[5:12])}{CANARY[12:]}"
    assert json.loads(scrub(f'{{"id": "{mixed}"}}', CANARY))["id"] == "[redacted]"
    # with no echo, a frame is left as it came, escapes and all
    plain = '{"type": "x", "text": "\\u0041\\u00e9 \\"\\u0022"}'
    assert scrub(plain, CANARY) is plain


async def test_a_key_echoed_in_json_escapes_never_reaches_an_event() -> None:
    async def hostile(ws: Any) -> None:
        await ws.send(json.dumps({"type": "session.created", "event_id": "event_1", "session": {"type": "realtime"}}))
        await ws.recv()  # the client's session.update
        await ws.send('{"type": "error", "event_id": "event_2", "error": {"type": "invalid_request_error", '
                      '"code": "%s", "param": null, "message": "key %s", "event_id": null}}'
                      % (_escaped(CANARY), _escaped(CANARY)))
        await ws.close(3000, "bye")

    seen, logs = await _until_fatal_against(hostile)
    errors = [e for e in seen if isinstance(e, SessionError) and e.code not in (None, "connection_closed")]
    assert errors and "key [redacted]" in errors[0].message and errors[0].code == "[redacted]", errors
    assert CANARY not in logs.getvalue() and CANARY not in " ".join(f"{e!r} {e}" for e in seen)


def test_the_event_log_redacts_every_event_either_way_and_stays_json() -> None:
    register_secret(CANARY)
    escaped = "".join(f"\\u{ord(c):04x}" for c in CANARY)  # an echo that is not the key's text on the wire
    log = io.StringIO()
    event_log = EventLog(log, lambda: 0.0)
    event_log.wire("in", '{"type": "session.created", "event_id": "e1", "session": {"instructions": "%s"}}' % escaped)
    event_log.wire("out", json.dumps({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": f"my key is {CANARY}"}]}}))
    event_log.wire("in", json.dumps({"type": "response.done", "event_id": "e2", "response": {
        "client_secret": {"value": "ek_0123456789abcdef"}, "note": "Authorization: Bearer abc123def456"}}))
    event_log.close()
    lines = [json.loads(line) for line in log.getvalue().splitlines()]  # every line still JSON
    assert CANARY not in log.getvalue() and "ek_0123456789abcdef" not in log.getvalue()
    assert lines[0]["event"]["session"]["instructions"] == "[redacted]"
    assert lines[1]["event"]["item"]["content"][0]["text"] == "my key is [redacted]"
    assert lines[2]["event"]["response"]["client_secret"] == {"value": "[redacted]"}


def test_settings_refused_for_a_wrong_type_do_not_echo_the_value() -> None:
    from voxline.session import SettingsError

    with pytest.raises(SettingsError) as refused:
        SessionSettings(api_key=[CANARY])  # type: ignore[arg-type]
    assert CANARY not in str(refused.value) and "api_key" in str(refused.value)
    assert refused.value.value is None and CANARY not in repr(refused.value.args)


async def test_a_key_a_server_echoes_in_a_frame_is_not_left_in_part_in_websockets_debug_log() -> None:
    """websockets logs a frame as its first 48 and last 24 characters: a key the server echoed across that cut (at
    the end of 'Incorrect API key provided: KEY') was cut before our filter saw the message, no longer matched, and
    20 of its 26 characters stayed in the log. The frame's text is redacted whole before websockets cuts it."""
    key = "canaryVV7x2Lm9Zt4Wv8Rb3Kc6"

    async def hostile(ws: Any) -> None:
        token = ws.request.headers["Authorization"].removeprefix("Bearer ")
        await ws.send(json.dumps({"type": "error", "event_id": "event_2", "error": {
            "type": "invalid_request_error", "code": "invalid_api_key", "message": f"Incorrect API key provided: {token}"}}))
        await ws.close(3000, f"invalid_request_error.invalid_api_key: the key {token} was refused")

    with debug_logs() as logs:
        async with ws_serve(hostile, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", key, open_timeout=5)
            try:
                async with asyncio.timeout(10):
                    await transport.recv()
                    with pytest.raises(Exception):
                        await transport.recv()
            finally:
                await transport.close()
    text = logs.getvalue()
    assert "TEXT" in text and "CLOSE" in text  # the frames were logged
    assert not any(key[i:i + 8] in text for i in range(len(key) - 7)), text
    forget_secret(key)


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A stand-in proxy: it records each request's Authorization header and answers 502."""

    seen: list[str] = []

    def _record(self) -> None:
        type(self).seen.append(self.headers.get("Authorization") or "")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_CONNECT = _record

    def log_message(self, *args: Any) -> None:
        pass


def test_a_proxy_the_environment_names_is_not_handed_the_key_for_a_server_on_this_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``http_proxy`` set for the web: ``voxline token`` against a local server sent its key to the proxy (plain
    HTTP, another host), and websockets would connect through it as well."""
    import subprocess

    from tests.support.cli import VOXLINE

    key = "canaryPX7x2Lm9Zt4Wv8Rb3Kc6"
    _Proxy.seen = []
    with loopback_http(_Proxy) as proxy_port:
        proxy = f"http://127.0.0.1:{proxy_port}"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_")},
               "OPENAI_API_KEY": key, "http_proxy": proxy, "https_proxy": proxy, "all_proxy": proxy, "no_proxy": ""}
        result = subprocess.run([str(VOXLINE), "token", "--url", "http://127.0.0.1:9/v1"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode != 0  # nothing listens there
        for name in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy)
        monkeypatch.setenv("no_proxy", "")

        async def dial() -> None:
            with pytest.raises(ConnectionFailed):
                await WebSocketTransport.connect("ws://127.0.0.1:9/v1", key, open_timeout=5)

        asyncio.run(dial())
    forget_secret(key)
    assert _Proxy.seen == []


AZURE_STYLE = "3f9c2a7d41be4c0e9d5a8b6f1e2d3c4b"  # a key of no shape redact() knows
QUOTING_TOOLS = """
import os
from voxline.session.tools import ToolRegistry

registry = ToolRegistry()


@registry.tool
def get_weather(city: str = "", unit: str = "") -> str:
    raise RuntimeError(f"the weather service refused key {os.environ['OPENAI_API_KEY']}")


@registry.tool
def get_time(zone: str = "") -> str:
    return "noon"
"""


def test_a_key_in_the_environment_is_redacted_even_where_the_command_does_not_use_it(tmp_path: Any) -> None:
    """With --local, OPENAI_API_KEY goes unused: one not shaped like sk-… was never registered, and a tool's
    error quoting it went to the event log and the terminal as it was."""
    import subprocess
    import sys

    from tests.support.cli import EXAMPLE

    (tmp_path / "quoting.py").write_text(QUOTING_TOOLS)
    run = subprocess.run([sys.executable, "-m", "voxline", "replay", str(EXAMPLE), "--local", "--fast", "--voice",
                          "tone", "--scenario", "tools", "--tools", "quoting:registry", "--out", "h.wav", "--events",
                          "e.jsonl", "--summary", "s.json"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OPENAI_API_KEY": AZURE_STYLE, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    events = (tmp_path / "e.jsonl").read_text()
    assert "the weather service refused key [redacted]" in events
    for text in (events, (tmp_path / "s.json").read_text(), run.stdout, run.stderr):
        assert AZURE_STYLE not in text
    # a farm's worker processes redact it too: they do not start as the command does
    (tmp_path / "b.wav").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "c.wav").write_bytes(EXAMPLE.read_bytes())
    farm = subprocess.run([sys.executable, "-m", "voxline", "replay", "b.wav", "c.wav", "--local", "--fast", "--voice",
                           "tone", "--scenario", "tools", "--tools", "quoting:registry", "--out-dir", "out",
                           "--processes", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OPENAI_API_KEY": AZURE_STYLE, "PYTHONPATH": str(tmp_path)})
    assert farm.returncode == 0, farm.stderr
    logs = [(tmp_path / "out" / name / "events.jsonl").read_text() for name in ("b", "c")]
    assert all("the weather service refused key [redacted]" in log and AZURE_STYLE not in log for log in logs)


def test_a_huge_server_message_is_cut_before_it_is_redacted_and_a_key_in_the_code_is_redacted() -> None:
    """Before, a 20 MB error message was redacted whole (seconds of the loop) and kept whole; its code was kept as
    sent, key and all."""
    register_secret(CANARY)
    error = SessionError("x" * 20_000_000 + CANARY, f"code {CANARY} " + "y" * 10_000)
    assert len(error.message) == MESSAGE_CHARS and error.message.endswith("…")
    assert error.code is not None and len(error.code) == CODE_CHARS and CANARY not in error.code
    assert error.code.startswith("code [redacted] ")
    short = SessionError(f"the key {CANARY} was refused", "invalid_api_key")
    assert short.message == "the key [redacted] was refused" and short.code == "invalid_api_key"
