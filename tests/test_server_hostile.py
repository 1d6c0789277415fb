"""The local server holds up under hostile input: typed 4xx answers and ``error`` events, never a
1011 close, a dropped request or a 500 traceback; its input buffer is bounded; its flags and
voices refuse nonsense in one line."""

from __future__ import annotations

import asyncio
import gc
import base64
import json
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets

from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.net.app import Server
from voxline.realtime.server.engine.validate import MAX_DEPTH
from tests.support.ci import require_tool
from tests.support.cli import one_line_error, voxline
from tests.support.engine_harness import Harness
from tests.support.raw_http import exchange, post_request, upgrade_request

KEY = "sk-hostile-test-key"

DEEP_FRAMES = [
    "[" * 100_000,  # the decoder's own recursion limit
    '{"type":"session.update","session":' + "[" * 5_000 + "]" * 5_000 + "}",
    '{"type":"session.update","session":{"type":"realtime","tools":[' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]}}",
    '{"a":' * 900 + "1" + "}" * 900,  # decodes, but deeper than the limit
]


def _post(path: str, body: bytes, *, authorization: bytes = b"Bearer " + KEY.encode(),
          content_type: bytes = b"application/json") -> bytes:
    return post_request(path, body, authorization=authorization, content_type=content_type)


@asynccontextmanager
async def local_server(**config: Any) -> AsyncIterator[Server]:
    async with serve(ServerConfig(**{"port": 0, "voice": "tone", "speed": math.inf, **config})) as server:
        yield server


# ---------------------------------------------------------------- deeply nested JSON


@pytest.mark.parametrize("frame", DEEP_FRAMES, ids=["array-100k", "session-5k", "tools-limit+1", "object-900"])
def test_engine_answers_deep_nesting_with_invalid_json_and_goes_on(frame: str) -> None:
    harness = Harness()
    [error] = harness.send(frame)
    assert error["type"] == "error"
    assert (error["error"]["type"], error["error"]["code"]) == ("invalid_request_error", "invalid_json")
    assert "nested deeper" in error["error"]["message"]
    [updated] = harness.send({"type": "session.update", "session": {"type": "realtime", "instructions": "x"}})
    assert updated["type"] == "session.updated"


def test_nesting_at_the_limit_is_accepted() -> None:
    schema: Any = {"type": "object"}
    for _ in range(25):  # tools[0].parameters… at a depth real tool schemas never reach
        schema = {"type": "object", "properties": {"x": schema}}
    tool = {"type": "function", "name": "deep", "description": "", "parameters": schema}
    [updated] = Harness().send({"type": "session.update", "session": {"type": "realtime", "tools": [tool]}})
    assert updated["type"] == "session.updated"


async def test_a_client_gone_during_the_opening_handshake_is_a_debug_line_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    upgrade = (b"GET /v1/realtime?model=x HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
               b"Authorization: Bearer x\r\n\r\n")
    caplog.set_level(logging.DEBUG)
    async with local_server() as server:
        for payload in (b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\n", upgrade):
            _reader, writer = await asyncio.open_connection(server.host, server.port)
            writer.write(payload)
            await writer.drain()
            writer.transport.abort()  # reset before the server's answer
        async with asyncio.timeout(10):
            while not any(r.getMessage().startswith("opening handshake failed: ") for r in caplog.records):
                await asyncio.sleep(0.01)
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [] and not any(r.exc_info for r in caplog.records)


async def test_websocket_keeps_the_connection_after_deep_frames() -> None:
    async with local_server() as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime",
                                      additional_headers={"Authorization": "Bearer x"}, max_size=None) as ws:
            for _ in range(2):
                await ws.recv()  # session.created, conversation.created
            for frame in DEEP_FRAMES:
                await ws.send(frame)
                error = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert (error["type"], error["error"]["type"], error["error"]["code"]) == (
                    "error", "invalid_request_error", "invalid_json")
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "input_audio_buffer.cleared"


@pytest.mark.parametrize("depth", [100_000, 900])
async def test_client_secrets_answers_a_deep_body_with_400(depth: int) -> None:
    body = b'{"session":' + b"[" * depth + b"]" * depth + b"}"
    async with local_server(api_key=KEY) as server:
        status, payload, _ = await exchange(server.port, _post("/v1/realtime/client_secrets", body))
        assert status == 400 and payload is not None
        assert (payload["error"]["type"], payload["error"]["code"]) == ("invalid_request_error", "invalid_json")
        # and the server still mints for a good request
        status, payload, _ = await exchange(server.port, _post("/v1/realtime/client_secrets", b"{}"))
        assert status == 200 and payload is not None and payload["value"].startswith("ek_")


async def test_client_secrets_checks_an_empty_session_as_given() -> None:
    """``{"session": {}}`` was minted as if no session were given; ``{"session": {"instructions": …}}`` was not."""
    async with local_server(api_key=KEY) as server:
        for body in (b'{"session":{}}', b'{"session":{"instructions":"hi"}}'):
            status, payload, _ = await exchange(server.port, _post("/v1/realtime/client_secrets", body))
            assert status == 400 and payload is not None
            assert (payload["error"]["code"], payload["error"]["param"]) == ("missing_required_parameter", "session.type")
        status, payload, _ = await exchange(server.port, _post("/v1/realtime/client_secrets", b"{}"))
        assert status == 200 and payload is not None and payload["value"].startswith("ek_")  # none: a Realtime one


# ---------------------------------------------------------------- SDP


SDP = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n"
       "a=mid:0\r\na=sendrecv\r\n{line}\r\n")


@pytest.mark.parametrize("line", ["a=rtpmap:", "a=rtpmap:111", "a=rtpmap:111 ", "a=rtpmap:111 opus",
                                  "a=rtpmap: opus/48000", "a=rtpmap:111 opus/abc", "a=rtpmap:300 opus/48000",
                                  "a=fmtp:", "a=fmtp:111", "a=setup:", "a=candidate:", "c="])
async def test_a_malformed_sdp_offer_gets_a_typed_400(line: str) -> None:
    async with local_server(api_key=KEY) as server:
        request = _post("/v1/realtime/calls", SDP.format(line=line).encode(), content_type=b"application/sdp")
        status, payload, body = await exchange(server.port, request)
        assert status == 400, body
        assert payload is not None and payload["error"]["type"] == "invalid_request_error"
        assert payload["error"]["message"].startswith("Invalid SDP offer")
        if line.startswith(("a=rtpmap", "a=fmtp")):
            assert repr(line) in payload["error"]["message"]  # the line is named
        assert server._calls.active == []


async def _aiortc_offer() -> str:
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    pc.addTransceiver("audio")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = str(pc.localDescription.sdp)
    await pc.close()
    return sdp


@pytest.mark.parametrize("change", [
    ("a=group:BUNDLE 0 1", "a=group:BUNDLE 7 1"),  # a BUNDLE naming a mid no m-line has
    ("a=mid:0", "a=mid:x"),  # an m-line whose mid the BUNDLE does not name
    ("a=setup:actpass\r\n", ""),  # no DTLS role
    ("a=rtcp-mux", "a=rtcp-mux\r\na=fmtp:99 x=1"),  # a format line for a payload type the m-line does not list
    ("m=audio", "m=video"),  # a video section without a video codec
    ("m=audio", "m=text"),  # a media kind aiortc does not know
])
async def test_an_offer_whose_lines_refer_to_what_is_not_there_gets_a_typed_400(change: tuple[str, str]) -> None:
    """Before, aiortc's AttributeError on these came out as a 500 server_error (and its StopIteration, turned into a
    RuntimeError, and OperationError still did); the connect task aiortc started for one it failed on then ended in
    "Task exception was never retrieved"."""
    offer = await _aiortc_offer()
    assert change[0] in offer
    loop = asyncio.get_running_loop()
    unheard: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: unheard.append(context))
    try:
        async with local_server(api_key=KEY) as server:
            for path in ("/v1/realtime/calls", "/v1/live/sessions"):
                bad = offer.replace(*change)
                body = bad.encode() if path.endswith("calls") else json.dumps(
                    {"session": {"model": "gpt-live"}, "transport": {"type": "webrtc", "sdp": bad}}).encode()
                kind = b"application/sdp" if path.endswith("calls") else b"application/json"
                status, payload, raw = await asyncio.wait_for(exchange(server.port, _post(path, body, content_type=kind)),
                                                              30)
                assert status == 400, raw
                assert payload is not None and payload["error"]["message"].startswith("Invalid SDP offer")
            assert server._calls.active == []
            async with asyncio.timeout(10):  # the connect tasks of the refused offers end
                while any(getattr(t.get_coro(), "__qualname__", "").startswith("RTCPeerConnection.")
                          for t in asyncio.all_tasks()):
                    await asyncio.sleep(0.01)
            gc.collect()  # a task whose exception nobody retrieved says so when it is collected
            assert unheard == []
    finally:
        loop.set_exception_handler(None)
    async with local_server(api_key=KEY) as server:
        good = _post("/v1/realtime/calls", offer.encode(), content_type=b"application/sdp")
        status, _, body = await asyncio.wait_for(exchange(server.port, good), 30)
        assert status == 201, body  # and the server still answers a good offer


async def test_an_offer_with_more_media_sections_than_a_call_uses_is_refused_before_aiortc_reads_it() -> None:
    """aiortc's work for an offer grows with the square of its m= sections: a megabyte offer of 3,300 audio sections
    was answered 201 after 4.4 s, the server's event loop held for 1.9 s of it, every other session stalled."""
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    pc.createDataChannel("oai-events")
    for _ in range(16):  # and the data section: 17, one more than the server takes
        pc.addTransceiver("audio")
    await pc.setLocalDescription(await pc.createOffer())
    offer = str(pc.localDescription.sdp)
    await pc.close()
    await _refused_by_both_endpoints(offer, "Invalid SDP offer: the offer has 17 media sections (m=…); at most 16 "
                                            "are taken")


@pytest.mark.parametrize(("kind", "line", "most"), [
    ("ICE candidates", "a=candidate:{i} 1 udp 2130706431 192.0.2.{h} {p} typ host", 64),
    ("SSRC attributes", "a=ssrc:{i} cname:x{i}", 256),
])
async def test_an_offer_with_more_candidates_or_ssrc_lines_than_a_peer_sends_is_refused_before_aiortc_reads_it(
    kind: str, line: str, most: int
) -> None:
    """aiortc's and aioice's work grows with the square of these lines: 20,000 SSRC lines (half a megabyte) or 7,000
    candidates held the server's event loop for 5-8 s, every other session stalled; a peer sends a handful."""
    offer = await _aiortc_offer()
    extra = "".join(line.format(i=i + 1, h=i % 250 + 1, p=10000 + i) + "\r\n" for i in range(most + 1))
    at = offer.index("m=application")
    padded = offer[:at] + extra + offer[at:]
    prefix = line[:line.index(":") + 1]
    count = sum(text.startswith(prefix) for text in padded.splitlines())
    assert count > most
    await _refused_by_both_endpoints(padded, f"Invalid SDP offer: the offer has {count} {kind} ({prefix}…); at most "
                                             f"{most} are taken")


@pytest.mark.parametrize(("line", "what"), [("a=fingerprint:", "DTLS certificate fingerprint"),
                                            ("a=setup:", "DTLS role")])
async def test_an_offer_without_dtls_is_refused_not_answered_and_left_to_fail(line: str, what: str) -> None:
    """Without a fingerprint the offer was answered 201 and a call opened, while aiortc's DTLS start failed in the
    background ('Task exception was never retrieved' in the server's log): no media could ever flow."""
    offer = await _aiortc_offer()
    stripped = "".join(kept for kept in offer.splitlines(keepends=True) if not kept.startswith(line))
    assert stripped != offer
    await _refused_by_both_endpoints(stripped, f"Invalid SDP offer: the offer has no {what} ({line}…), which a "
                                               "WebRTC peer must send")


async def _refused_by_both_endpoints(offer: str, message: str) -> None:
    """``offer`` posted to the Realtime calls endpoint and to GPT-Live's: each answers 400 with ``message`` and
    opens no call."""
    async with local_server(api_key=KEY) as server:
        for path in ("/v1/realtime/calls", "/v1/live/sessions"):
            body = offer.encode() if path.endswith("calls") else json.dumps(
                {"transport": {"type": "webrtc", "sdp": offer}}).encode()
            request = _post(path, body, content_type=b"application/sdp" if path.endswith("calls") else b"application/json")
            status, payload, raw = await asyncio.wait_for(exchange(server.port, request), 30)
            assert status == 400, raw
            assert payload is not None and payload["error"]["message"] == message
        assert server._calls.active == []


@pytest.mark.parametrize(("size", "said"), [
    ("1", "under the 16384 bytes"), ("300", "under the 16384 bytes"), ("16383", "under the 16384 bytes"),
    ("-1", "is negative"),
])
async def test_an_offer_whose_channel_takes_too_small_a_message_is_refused(size: str, said: str) -> None:
    """Before, such an offer was answered 201: the server could send neither ``session.created`` nor the error saying
    it was too large, the failed second send raised inside aiortc's DTLS loop, and the caller had an open channel
    that never spoke."""
    offer = await _aiortc_offer()
    assert "a=max-message-size:262144" in offer
    small = offer.replace("a=max-message-size:262144", f"a=max-message-size:{size}")
    async with local_server(api_key=KEY) as server:
        for path in ("/v1/realtime/calls", "/v1/live/sessions"):
            body = small.encode() if path.endswith("calls") else json.dumps(
                {"session": {"model": "gpt-live"}, "transport": {"type": "webrtc", "sdp": small}}).encode()
            request = _post(path, body, content_type=b"application/sdp" if path.endswith("calls") else b"application/json")
            status, payload, raw = await asyncio.wait_for(exchange(server.port, request), 30)
            assert status == 400, raw
            assert payload is not None and payload["error"]["type"] == "invalid_request_error"
            message = payload["error"]["message"]
            assert message.startswith(f"Invalid SDP offer: a=max-message-size {size} ") and said in message
            assert "\n" not in message
        assert server._calls.active == []
        good = offer.replace("a=max-message-size:262144", "a=max-message-size:16384")
        request = _post("/v1/realtime/calls", good.encode(), content_type=b"application/sdp")
        status, _, raw = await asyncio.wait_for(exchange(server.port, request), 30)
        assert status == 201, raw  # the least every peer takes is enough


class _TinyChannel:
    """A data channel whose peer takes ``room`` bytes, refusing larger messages as aiortc does; or already closed."""

    def __init__(self, room: int, state: str = "open") -> None:
        self.room, self.readyState, self.sent = room, state, list[str]()
        self.bufferedAmount = 0  # its peer reads all it is sent

    def send(self, text: str) -> None:
        from aiortc.exceptions import InvalidStateError

        if self.readyState != "open":
            raise InvalidStateError
        if len(text.encode()) > self.room:
            raise ValueError(f"Cannot send message of {len(text.encode())} bytes, the remote party only supports "
                             f"messages up to {self.room} bytes")
        self.sent.append(text)

    def close(self) -> None:
        self.readyState = "closing"


@pytest.mark.parametrize(("room", "state", "outcome"), [
    (10_000, "open", "error"),  # the event does not fit, its error does
    (5, "open", "closed"),  # not even the error fits: the channel is closed, nothing raised
    (10_000, "closed", None),  # closed meanwhile
])
def test_a_send_on_a_calls_channel_never_raises(room: int, state: str, outcome: str | None) -> None:
    """It runs in aiortc's callbacks: what it raised ended the peer's DTLS loop, and the call went silent."""
    from voxline.realtime.server.engine.errors import ErrorSpec
    from voxline.realtime.server.net.rtc_offer import send_or_refuse

    channel = _TinyChannel(room, state)

    def refusal(spec: ErrorSpec) -> str:
        return json.dumps({"type": "error", "error": {"code": spec.code, "message": spec.message}})

    sent = send_or_refuse(channel, "x" * 20_000, "session.created", refusal)  # type: ignore[arg-type]
    if outcome == "error":
        assert sent is not None and channel.sent == [sent] and json.loads(sent)["error"]["code"] == "event_too_large"
    else:
        assert sent is None and channel.sent == []
        assert channel.readyState == ("closing" if outcome == "closed" else "closed")


@pytest.mark.parametrize(("session", "said"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested"),
    (b'{"type":"realtime","temperature":NaN}', "NaN is not a JSON value"),
    (b'{"type":"realtime","max_output_tokens":' + b"9" * 5000 + b"}", "more digits than a JSON number may"),
])
async def test_a_calls_session_part_is_read_as_every_body_is(session: bytes, said: str) -> None:
    """Before, a deep session part was a 500, NaN was taken as a number, and a long number's error was Python's."""
    body = (b'--b0\r\nContent-Disposition: form-data; name="sdp"\r\nContent-Type: application/sdp\r\n\r\n'
            + (await _aiortc_offer()).encode() + b'\r\n--b0\r\nContent-Disposition: form-data; name="session"\r\n\r\n'
            + session + b"\r\n--b0--\r\n")
    async with local_server(api_key=KEY) as server:
        request = _post("/v1/realtime/calls", body, content_type=b"multipart/form-data; boundary=b0")
        status, payload, raw = await asyncio.wait_for(exchange(server.port, request), 30)
        assert status == 400, raw
        assert payload is not None and payload["error"]["code"] == "invalid_json"
        assert said in payload["error"]["message"] and "sys." not in payload["error"]["message"]
        assert server._calls.active == []


@pytest.mark.parametrize(("head", "status", "code"), [
    (b"Content-Length: 2000000", 413, "request_too_large"),  # before: "Malformed HTTP request." with no code
    (b"Transfer-Encoding: chunked", 411, "length_required"),  # before: the body unread, "The SDP offer is empty."
    (b"Content-Length: 0_2", 400, None),  # before: taken as 2, as int() reads it
    (b"Content-Length: +2", 400, None),
])
async def test_a_head_the_server_does_not_take_is_refused_by_what_it_says(head: bytes, status: int,
                                                                          code: str | None) -> None:
    request = (b"POST /v1/realtime/client_secrets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
               + KEY.encode() + b"\r\nContent-Type: application/json\r\n" + head + b"\r\n\r\n{}")
    async with local_server(api_key=KEY) as server:
        got, payload, raw = await exchange(server.port, request)
        assert got == status, raw
        assert payload is not None and payload["error"]["code"] == code


@pytest.mark.parametrize("extra", [b"Cookie: " + b"a=b; " * 1700 + b"\r\n",  # a browser's cookies for localhost
                                   b"".join(b"X-%d: 1\r\n" % n for n in range(200))],
                         ids=["long header line", "many headers"])
async def test_an_upgrade_whose_head_websockets_refuses_as_too_large_is_a_400(extra: bytes,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    """Before, the connection was dropped unanswered and the server printed a traceback: websockets' SecurityError
    is no ValueError (any more), and escaped the head's check."""
    request = upgrade_request(b"Bearer " + KEY.encode())
    request = request[:-2] + extra + b"\r\n"
    async with local_server(api_key=KEY) as server:
        status, payload, raw = await asyncio.wait_for(exchange(server.port, request), 20)
        assert status == 400 and payload is not None, raw
        # and the server goes on: a plain upgrade is answered
        again, _payload, _raw = await asyncio.wait_for(exchange(server.port, _post("/v1/realtime/client_secrets", b"{}")), 20)
        assert again == 200
    assert "Traceback" not in caplog.text and "Fatal error" not in caplog.text


# ---------------------------------------------------------------- bearer that is not UTF-8


BAD_BEARERS = [b"Bearer \xff\xfe", b"Bearer sk-\xc3\x28abc", b"Bearer \x80" + KEY.encode()]


@pytest.mark.parametrize("api_key", [KEY, None], ids=["with-key", "any-key"])
@pytest.mark.parametrize("bearer", BAD_BEARERS)
async def test_a_non_utf8_bearer_is_refused_with_401_everywhere(api_key: str | None, bearer: bytes) -> None:
    async with local_server(api_key=api_key) as server:
        for request in (upgrade_request(bearer), _post("/v1/realtime/client_secrets", b"{}", authorization=bearer),
                        _post("/v1/realtime/calls", SDP.format(line="").encode(), authorization=bearer,
                              content_type=b"application/sdp")):
            status, payload, body = await exchange(server.port, request)
            assert status == 401, body
            assert payload is not None and payload["error"]["code"] == "invalid_api_key"


# ---------------------------------------------------------------- the input audio buffer


def _append(size: int, value: int = 0) -> dict[str, Any]:
    return {"type": "input_audio_buffer.append", "audio": base64.b64encode(bytes([value]) * size).decode()}


MANUAL = {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}}}


def test_an_append_past_the_buffer_cap_is_refused_and_the_buffer_kept() -> None:
    harness = Harness(max_buffer_bytes=48_000)  # one second
    harness.send(MANUAL)
    assert harness.send(_append(30_000)) == []
    [error] = harness.send({**_append(20_000), "event_id": "evt_big"})
    assert error["error"]["type"] == "invalid_request_error"
    assert (error["error"]["code"], error["error"]["param"], error["error"]["event_id"]) == (
        "invalid_value", "audio", "evt_big")
    assert "maximum of 48000 bytes" in error["error"]["message"]
    assert harness.send(_append(18_000)) == []  # exactly up to the cap is fine
    events = harness.send({"type": "input_audio_buffer.commit"})
    assert events[0]["type"] == "input_audio_buffer.committed"
    assert harness.engine._state.input.buffered_bytes == 0


def test_the_default_cap_is_the_services_per_event_maximum() -> None:
    harness = Harness()
    harness.send(MANUAL)
    assert harness.engine._state.config.max_buffer_bytes == 15 * 1024 * 1024


def test_silence_under_vad_does_not_fill_the_buffer() -> None:
    """An idle kiosk streams silence for hours: the buffer keeps only what a speech start can reach."""
    harness = Harness(max_buffer_bytes=2_000_000)
    for _ in range(100):  # 100 × 1 s of silence, 4.8 MB in all
        assert harness.send(_append(48_000)) == []
    # the prefix padding and ten seconds before the latest append, plus that append
    assert harness.engine._state.input.buffered_bytes <= 48_000 * 12


# ---------------------------------------------------------------- flags and voices


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-3", "1e300"])
def test_max_session_minutes_refuses_non_finite_and_non_positive(value: str) -> None:
    line = one_line_error(voxline("serve", "--port", "0", "--voice", "tone", f"--max-session-minutes={value}"))
    assert "--max-session-minutes" in line and "finite" in line


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -1.0, 0.0])
def test_server_config_refuses_a_non_finite_session_cap(seconds: float) -> None:
    with pytest.raises(ConfigurationError):
        ServerConfig(max_session_s=seconds)


@pytest.mark.slow
@pytest.mark.parametrize("url", ["::::", "http://127.0.0.1:abc/v1", "http://[::1/v1", "ftp://127.0.0.1/v1",
                                 "ws://[::1/v1/realtime", ""])
def test_token_with_a_bad_url_is_one_line(url: str) -> None:
    line = one_line_error(voxline("token", "--url", url, env={"OPENAI_API_KEY": "sk-test-not-a-real-key"}))
    assert "--url" in line and "sk-test-not-a-real-key" not in line


@pytest.mark.slow
def test_serve_with_an_unknown_espeak_variant_is_one_line() -> None:
    require_tool("espeak-ng")
    line = one_line_error(voxline("serve", "--port", "0", "--voice", "espeak:nosuchvariant"))
    assert "nosuchvariant" in line and "espeak-ng" in line


# ---------------------------------------------------------------- found by tests/test_fuzz_server.py


@pytest.mark.parametrize("frame", [
    {"type": "conversation.item.create", "item": {"type": "message", "role": "user",
                                                  "content": [{"type": [], "text": "hi"}]}},
    {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": ["hi"]}},
    {"type": "response.create", "response": {"metadata": {"client_event_id": []}}},
    {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": {
        "type": "server_vad", "prefix_padding_ms": 1e308}}}}},
    '{"type": "conversation.item.truncate", "item_id": "x", "content_index": 0, "audio_end_ms": NaN}',
    '{"type": "conversation.item.truncate", "item_id": "x", "content_index": 0, "audio_end_ms": 1e400}',
    '{"type": "conversation.item.truncate", "item_id": "x", "content_index": 0, "audio_end_ms": -Infinity}',
    '{"type": "conversation.item.truncate", "item_id": "x", "content_index": 0, "audio_end_ms": ' + "9" * 400 + "}",
], ids=["part-type-list", "part-not-object", "metadata-not-string", "int-1e308", "NaN", "1e400", "-Infinity",
        "400-digit-int"])
def test_frames_that_crashed_or_passed_the_engine_get_an_error(frame: dict[str, Any] | str) -> None:
    harness = Harness()
    [error] = harness.send(frame)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    [cleared] = harness.send({"type": "input_audio_buffer.clear"})
    assert cleared["type"] == "input_audio_buffer.cleared"


async def test_a_deep_frame_on_the_webrtc_data_channel_is_an_error_and_the_call_goes_on() -> None:
    from voxline.realtime.transports.webrtc import WebRTCTransport

    async with local_server(api_key=KEY) as server:
        transport = await WebRTCTransport.connect(server.http_url, KEY)
        try:
            seen: list[dict[str, Any]] = []

            async def until(kind: str) -> dict[str, Any]:
                async with asyncio.timeout(10):
                    while True:
                        seen.append(event := json.loads(await transport.recv()))
                        if event["type"] == kind:
                            return event

            await until("conversation.created")
            await transport.send("[" * 100_000)
            error = await until("error")
            assert (error["error"]["type"], error["error"]["code"]) == ("invalid_request_error", "invalid_json")
            await transport.send(json.dumps({"type": "session.update", "session": {"type": "realtime"}}))
            await until("session.updated")
            assert server._calls.active  # the call is still up
        finally:
            await transport.close()


async def test_an_engine_failure_is_a_server_error_event_not_a_1011(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net under the engine: a bug of ours answers like the service and keeps the session."""
    from voxline.realtime.server.engine.core import Engine

    real = Engine.receive

    def flaky(self: Engine, frame: str | bytes, now: float) -> list[dict[str, Any]]:
        if isinstance(frame, str) and "boom" in frame:
            raise RuntimeError("boom")
        return real(self, frame, now)

    monkeypatch.setattr(Engine, "receive", flaky)
    async with local_server() as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime",
                                      additional_headers={"Authorization": "Bearer x"}) as ws:
            for _ in range(2):
                await ws.recv()
            await ws.send('{"type": "boom"}')
            error = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert (error["type"], error["error"]["type"]) == ("error", "server_error")
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "input_audio_buffer.cleared"


async def test_an_http_handler_failure_is_a_json_500_not_a_dropped_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxline.realtime.server.net import app

    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(app, "mint_client_secret", broken)
    async with local_server(api_key=KEY) as server:
        status, payload, _ = await exchange(server.port, _post("/v1/realtime/client_secrets", b"{}"))
        assert status == 500 and payload is not None and payload["error"]["type"] == "server_error"


# ---------------------------------------------------------------- a WebRTC caller that does not read


async def test_a_caller_that_leaves_its_channels_events_unread_is_hung_up_on(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A caller whose SCTP took none of the server's messages while it sent frames had every answer held for it:
    50 updates of 200 KB left 19.8 MB waiting on the server's channel, growing without end. SCTP gives the server no
    way to stop reading such a peer, as its WebSocket stops reading a session's client, so the call ends."""
    from voxline.realtime.server.net import sideband
    from voxline.realtime.transports.webrtc import WebRTCTransport

    monkeypatch.setattr(sideband, "UNSENT_LIMIT", 1_000_000)
    caplog.set_level(logging.WARNING, "voxline.server")
    async with local_server(api_key=KEY) as server:
        transport = await WebRTCTransport.connect(server.http_url, KEY)
        try:
            async with asyncio.timeout(10):
                while json.loads(await transport.recv())["type"] != "conversation.created":
                    pass
            call = server._calls.find(transport.call_id or "")
            assert call is not None

            async def deaf(_chunk: object) -> None:  # takes none of the server's data, so acknowledges none
                return None

            transport._pc.sctp._receive_data_chunk = deaf  # type: ignore[method-assign]
            update = json.dumps({"type": "session.update", "session": {"type": "realtime", "instructions": "x" * 200_000}})
            for _ in range(10):  # each answered with its 200 KB of instructions: twice the limit in all
                await transport.send(update)
            async with asyncio.timeout(10):
                while not call.ended:
                    await asyncio.sleep(0.01)
                while server._calls.active:
                    await asyncio.sleep(0.01)
        finally:
            await transport.close()
    said = [r.getMessage() for r in caplog.records if "unread" in r.getMessage()]
    assert said == ["call ended: its caller left more than 1000000 bytes of events unread on its data channel"]
