"""Plain HTTP on the local server's port, read as HTTP/1.1 has it: CRLF heads (a bare LF refused at once, not waited
on), ``Expect: 100-continue`` answered, case-sensitive methods, ``HEAD`` answered without a body, and a 404 that
does not say a query back."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.http_message import (
    CONTINUE,
    HttpResponse,
    RefusedHead,
    parse_head,
    parse_request,
)
from voxline.realtime.server.net.app import Server
from tests.support.raw_http import exchange, parse_http, post_request, upgrade_request

KEY = "sk-http-messages-key"
BEARER = b"Bearer " + KEY.encode()
HEAD_WAIT_S = 5.0  # well under the server's 10 s head timeout: an answer within it was not the timeout's


@asynccontextmanager
async def local_server() -> AsyncIterator[Server]:
    async with serve(ServerConfig(port=0, voice="tone", speed=math.inf, api_key=KEY)) as server:
        yield server


# ---------------------------------------------------------------- the parser, on plain bytes


def test_a_bare_lf_is_refused_as_soon_as_it_comes_not_when_the_head_would_end() -> None:
    with pytest.raises(ValueError, match="CRLF"):
        parse_head(b"POST /v1/realtime/client_secrets HTTP/1.1\nHost: x")  # the head is not whole yet
    with pytest.raises(ValueError, match="CRLF"):
        parse_head(b"POST /v1/x HTTP/1.1\r\nHost: x\n\r\n\r\n")
    # a body may hold any bytes
    request = parse_request(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n\n\n\n")
    assert request is not None and request.body == b"\n\n\n"


def test_a_method_keeps_its_case_and_must_be_a_token() -> None:
    request = parse_request(b"post /v1/realtime/client_secrets HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert request is not None and request.method == "post"
    for line in (b"PO ST /v1 HTTP/1.1", b"POST", b"POST /v1", b"P\xc3\xb6ST /v1 HTTP/1.1", b"POST /v1 FTP/1.0"):
        with pytest.raises(ValueError, match="malformed request line"):
            parse_head(line + b"\r\n\r\n")


def test_expect_is_read_and_only_100_continue_is_taken() -> None:
    head = parse_head(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n")
    assert head is not None and head.expects_continue
    assert head.request(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n") is None
    with pytest.raises(RefusedHead) as refused:
        parse_head(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n")
    assert refused.value.status == 417


def test_only_an_http_11_client_is_told_to_go_on() -> None:
    for version, expects in ((b"HTTP/1.1", True), (b"HTTP/1.0", False)):
        head = parse_head(b"POST /v1/x " + version + b"\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        assert head is not None and head.expects_continue is expects


@pytest.mark.parametrize(("head", "said"), [
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\n", "malformed header line"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Authorization: Bearer k\r\n\r\n", "folded"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\n\tX-B: 2\r\n\r\n", "folded"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", "malformed header line"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\n: empty name\r\n\r\n", "malformed header line"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nX-C: a\x00b\r\n\r\n", "control characters"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nX-C: a\rb\r\n\r\n", "control characters"),
    (b"POST /v1/x HTTP/\x00junk\r\nHost: x\r\n\r\n", "HTTP version"),
    (b"POST /v1/x HTTP/2.0\r\nHost: x\r\n\r\n", "HTTP version"),
    (b"POST /v1/x HTTP/1.1 extra\r\nHost: x\r\n\r\n", "malformed request line"),
    (b"POST /v1/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", "malformed request line"),
    (b"POST /v1/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "Host"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", "not a number"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 200 + b"\r\n", "more than 128 headers"),
    (b"POST /v1/x HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n", "too large"),
])
def test_a_head_is_read_as_strictly_as_http_11_asks(head: bytes, said: str) -> None:
    """The parser took a space before the colon as the body's length, a folded line as an ``Authorization`` of its
    own, lines without a colon, NUL and CR in values, any version, no Host, an empty length as 0, and a head of any
    size and header count that came whole in one read. Each is refused now, never guessed at."""
    with pytest.raises(ValueError, match=said):
        parse_head(head)


def test_a_head_http_11_takes_is_still_read() -> None:
    head = parse_head(b"POST /v1/x?a=%FF HTTP/1.0\r\nX-Empty:\r\nX-Tab:\ta\tb \r\nContent-Length: 0\r\n\r\n")
    assert head is not None and head.query == "a=%FF" and head.version == "HTTP/1.0"
    assert head.headers == {"x-empty": "", "x-tab": "a\tb", "content-length": "0"}


def test_a_head_only_encoding_says_the_length_and_sends_no_body() -> None:
    response = HttpResponse(404, {"error": {"message": "x"}})
    whole, head_only = response.encode(), response.encode(head_only=True)
    assert whole.startswith(head_only) and head_only.endswith(b"\r\n\r\n")
    assert f"Content-Length: {len(whole) - len(head_only)}".encode() in head_only


# ---------------------------------------------------------------- on the wire


@pytest.mark.parametrize("request_bytes", [
    b"POST /v1/realtime/client_secrets HTTP/1.1\nHost: 127.0.0.1\nAuthorization: " + BEARER + b"\n\n",
    b"GET /v1/realtime HTTP/1.1\nHost: 127.0.0.1\nUpgrade: websocket\nAuthorization: " + BEARER + b"\n\n",
], ids=["post", "get"])
async def test_a_head_with_bare_lf_line_endings_is_answered_400_at_once(request_bytes: bytes) -> None:
    """Before, the head never ended for the server, which waited for its 10 s head timeout."""
    async with local_server() as server:
        status, payload, raw = await asyncio.wait_for(exchange(server.port, request_bytes), HEAD_WAIT_S)
    assert status == 400, raw
    assert payload is not None and "CRLF" in payload["error"]["message"]


async def test_a_client_that_expects_100_continue_is_told_to_go_on_before_it_sends_the_body() -> None:
    """curl sends ``Expect: 100-continue`` with any body over 1 KiB and holds it back until told (or a second)."""
    body = json.dumps({"session": {"type": "realtime", "instructions": "x" * 2000}}).encode()
    head = post_request("/v1/realtime/client_secrets", body, authorization=BEARER).split(b"\r\n\r\n")[0]
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(head + b"\r\nExpect: 100-continue\r\n\r\n")
            await writer.drain()
            told = await asyncio.wait_for(reader.readexactly(len(CONTINUE)), HEAD_WAIT_S)
            assert told == CONTINUE
            writer.write(body)
            await writer.drain()
            status, payload, raw = parse_http(await asyncio.wait_for(reader.read(), 10))
        finally:
            writer.close()
    assert status == 200, raw
    assert payload is not None and payload["value"].startswith("ek_")


@pytest.mark.parametrize(("extra", "status"), [(b"", b"404"), (b"Transfer-Encoding: chunked\r\n", b"411")],
                         ids=["answered", "refused at its head"])
async def test_a_head_request_is_answered_without_a_body(extra: bytes, status: bytes) -> None:
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"HEAD /v1/realtime/client_secrets HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n")
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 10)
        finally:
            writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 " + status + b" ") and b"Content-Length: " in head
    assert body == b""


async def test_a_lowercase_method_is_not_the_uppercase_one() -> None:
    """Methods are case-sensitive: ``post`` mints no key (before, it was read as ``POST``)."""
    async with local_server() as server:
        request = post_request("/v1/realtime/client_secrets", b"{}", authorization=BEARER).replace(b"POST", b"post", 1)
        status, payload, raw = await exchange(server.port, request)
    assert status == 404, raw
    assert payload is not None and "value" not in payload


async def test_an_unknown_websocket_path_is_not_said_back_with_its_query() -> None:
    secret = b"sk-in-the-query-0123456789"
    async with local_server() as server:
        status, payload, raw = await exchange(server.port, upgrade_request(BEARER, b"/v1/nowhere?api_key=" + secret))
    assert status == 404, raw
    assert payload is not None and payload["error"]["message"] == "Unknown path /v1/nowhere."
    assert secret not in raw


@pytest.mark.parametrize("target", [b"/v1/\xff\xfe", b"/v1/realtime?model=\xff\xfe"])
async def test_a_target_that_is_not_ascii_is_a_400_not_a_lone_surrogate_said_back(target: bytes) -> None:
    """Before, ``GET /v1/\\xff`` was answered "Unknown path /v1/\\udcff." and ``?model=\\xff`` opened a session whose
    ``session.created`` named that model: lone surrogates, which strict JSON readers refuse."""
    async with local_server() as server:
        status, payload, raw = await exchange(server.port, upgrade_request(BEARER, target))
    assert status == 400, raw
    assert payload is not None and "ASCII" in payload["error"]["message"]
    assert b"\\ud" not in raw.lower()


@pytest.mark.parametrize("header", [
    b"Sec-WebSocket-Protocol: realtime, openai-insecure-api-key." + KEY.encode() + b", @",
    b"Sec-WebSocket-Protocol: realtime, @zz9Secret-Value-0123",
])
async def test_a_refused_handshake_does_not_say_back_the_header_value_it_refuses(header: bytes) -> None:
    """websockets quotes the header it refuses; the browser's subprotocols carry its key, which the JSON 400 said
    back (and so did a key put in any other header it refuses)."""
    request = upgrade_request(BEARER).replace(b"\r\n\r\n", b"\r\n" + header + b"\r\n\r\n")
    async with local_server() as server:
        status, payload, raw = await exchange(server.port, request)
    assert status == 400, raw
    assert payload is not None and payload["error"]["message"].endswith("invalid Sec-WebSocket-Protocol header.")
    assert KEY.encode() not in raw and b"zz9Secret" not in raw


async def _half_closed(port: int, request: bytes) -> bytes:
    """``request`` sent, the sending side shut (``shutdown(SHUT_WR)``), and everything the server answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    writer.write_eof()
    raw = await asyncio.wait_for(reader.read(), HEAD_WAIT_S)
    writer.close()
    return raw


async def test_a_request_sent_whole_and_then_half_closed_is_still_answered() -> None:
    """A client may shut its sending side once its request is out: the server closed the connection unanswered (the
    request still ran: a WebRTC offer took a call's place that no one was told of)."""
    async with local_server() as server:
        raw = await _half_closed(server.port, post_request("/v1/realtime/client_secrets", b"{}", authorization=BEARER))
    status, payload, _ = parse_http(raw)
    assert status == 200 and payload is not None and payload["value"].startswith("ek_"), raw


@pytest.mark.parametrize(("cut", "said"), [(b"{", "after 1 of its 2 body bytes"), (b"", "after 0 of its 2")])
async def test_a_request_half_closed_before_its_body_ended_is_a_400_at_once(cut: bytes, said: str) -> None:
    request = post_request("/v1/realtime/client_secrets", b"{}", authorization=BEARER)
    async with local_server() as server:
        raw = await _half_closed(server.port, request[: len(request) - 2] + cut)
        head_cut = await _half_closed(server.port, request[:30])
    status, payload, _ = parse_http(raw)
    assert status == 400 and payload is not None and said in payload["error"]["message"], raw
    assert parse_http(head_cut)[0] == 400 and b"before its head" in head_cut


async def test_a_request_refused_at_its_head_is_answered_while_its_body_still_comes() -> None:
    """A 4 MB POST was refused at its head and the connection closed at once, its body unread: the kernel reset the
    connection, and a client that sends its body before it reads (http.client, most do) saw the reset, never the
    413. Now the answer goes, and what still comes is read and dropped (up to a bound) before the close."""
    body = b"x" * (4 * 1024 * 1024)
    request = post_request("/v1/realtime/client_secrets", body, authorization=BEARER)
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request)
        await writer.drain()  # the whole body goes (a reset would fail it)
        raw = await asyncio.wait_for(reader.read(), HEAD_WAIT_S)
        writer.close()
    status, payload, _ = parse_http(raw)
    assert status == 413 and payload is not None and payload["error"]["code"] == "request_too_large", raw


async def test_what_a_refused_request_sends_past_the_bound_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxline.realtime.server.net import connection

    monkeypatch.setattr(connection, "DISCARD_BYTES", 1024)
    monkeypatch.setattr(connection, "DISCARD_S", 60.0)  # the bound, not the deadline, ends it
    request = post_request("/v1/realtime/client_secrets", b"x" * (2 * 1024 * 1024), authorization=BEARER)
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request)
        with pytest.raises(ConnectionError):  # closed after a KiB of the body: the rest is refused by a reset
            async with asyncio.timeout(HEAD_WAIT_S):
                await writer.drain()
                while await reader.read(65536):
                    pass
                writer.write(b"x" * 65536)
                await writer.drain()
        writer.close()


@pytest.mark.parametrize("request_bytes", [
    b"POST /v1/realtime/client_secrets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n{}",  # body short
    b"POST /v1/realtime/client_secrets HTTP/1.1\r\nHost: 127.0",  # a head that never ends
    b"GET /v1/realtime?model=gpt-realtime HTTP/1.1\r\nHost: 127.0",  # a handshake that never ends
])
async def test_a_request_not_received_whole_in_time_is_answered_408(
    request_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the connection was closed at the opening deadline with nothing said."""
    from voxline.realtime.server.net import app

    monkeypatch.setattr(app, "OPEN_TIMEOUT_S", 0.3)
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request_bytes)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), HEAD_WAIT_S)
        writer.close()
    status, payload, _ = parse_http(raw)
    assert status == 408 and payload is not None and payload["error"]["code"] == "request_timeout", raw


async def test_a_connection_that_sent_nothing_or_one_the_server_stops_for_gets_no_408(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 408 says the request did not come whole in time: a connection that sent no byte (a browser's preconnect)
    is closed unanswered at the deadline, and a half-sent request is not told 408 when the server stops early."""
    from voxline.realtime.server.net import app

    monkeypatch.setattr(app, "OPEN_TIMEOUT_S", 0.3)
    async with local_server() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await asyncio.wait_for(reader.read(), HEAD_WAIT_S) == b""
        writer.close()
    monkeypatch.setattr(app, "OPEN_TIMEOUT_S", 30.0)
    server = await serve(ServerConfig(port=0, voice="tone", speed=math.inf, api_key=KEY)).__aenter__()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"POST /v1/realtime/client_secrets HTTP/1.1\r\nHost: 127.0")
    await writer.drain()
    handlers = server._ws.handlers
    async with asyncio.timeout(HEAD_WAIT_S):  # until the server holds the head's start
        while not any(connection._pending for connection in handlers):
            await asyncio.sleep(0)
    for task in list(handlers.values()):  # what a stopping loop does to the tasks it runs (asyncio.run after Ctrl-C)
        task.cancel()
    raw = await asyncio.wait_for(reader.read(), HEAD_WAIT_S)
    writer.close()
    await server.close()
    assert b"408" not in raw


async def test_bytes_sent_after_a_get_head_before_its_answer_are_taken_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """websockets read them as frames while the handshake was still being answered, failed the connection, then failed
    again answering the handshake: "unexpected internal error" logged with its traceback, the client unanswered (a 404
    as much as a 101). They are held until the handshake is answered and handed over then, in order."""
    from websockets.frames import Frame, Opcode

    update = Frame(Opcode.TEXT, json.dumps({"type": "session.update", "event_id": "evt_early",
                                            "session": {"type": "realtime", "instructions": "early"}}).encode())
    async with local_server() as server:
        status, payload, raw = await exchange(server.port, upgrade_request(BEARER, b"/v1/nowhere") + b"{}")
        assert status == 404 and payload is not None, raw
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(upgrade_request(BEARER) + update.serialize(mask=True, extensions=[]))  # a frame before the 101
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_WAIT_S)
        assert answer.startswith(b"HTTP/1.1 101"), answer
        seen = b""
        async with asyncio.timeout(HEAD_WAIT_S):
            while b'"evt_early"' not in seen and b"session.updated" not in seen:
                seen += await reader.read(65536)
        writer.close()
    assert b"session.updated" in seen or b'"evt_early"' in seen
    assert not [r for r in caplog.records if "unexpected internal error" in r.getMessage()]
