"""Incoming data-channel messages: reassembled in linear time, and capped at the size this end advertises.

aiortc rescanned every fragment it held each time one more arrived (work growing with the square of a message's
size) and took a message of any size whatever its own ``a=max-message-size`` said: one 20 MB message from a peer
held the event loop for half a minute. A message past the cap is dropped unread, the peer is told (the local
server) or the app is (a client), and the next message is read as ever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Iterator

import pytest
from aiortc.rtcsctptransport import (SCTP_DATA_FIRST_FRAG, SCTP_DATA_LAST_FRAG, SCTP_DATA_UNORDERED, DataChunk,
                                     InboundStream)

from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.transports.rtc_reassembly import CappedStream
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.session.events import ResponseFinished, SessionError
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.rtc_raw import send_raw_text
from tests.support.session_events import until

KEY = "sk-reassembly-test-key"
LIMIT = 1000


class Window:
    """The receive window's bookkeeping as aiortc's receive path does it, with what the stream hands back."""

    def __init__(self) -> None:
        self.held = 0
        self.dropped = 0

    def credit(self, size: int) -> None:
        self.held -= size


def _stream() -> tuple[CappedStream, Window]:
    window = Window()

    def dropped() -> None:
        window.dropped += 1

    return CappedStream(LIMIT, window.credit, dropped), window


def _fragments(tsn: int, seq: int, data: bytes, size: int = 100, *, unordered: bool = False) -> list[DataChunk]:
    chunks = []
    for n, at in enumerate(range(0, len(data), size)):
        chunk = DataChunk(flags=(SCTP_DATA_FIRST_FRAG if at == 0 else 0)
                          | (SCTP_DATA_LAST_FRAG if at + size >= len(data) else 0)
                          | (SCTP_DATA_UNORDERED if unordered else 0))
        chunk.tsn, chunk.stream_id, chunk.stream_seq, chunk.protocol = tsn + n, 1, seq, 51
        chunk.user_data = data[at:at + size]
        chunks.append(chunk)
    return chunks


def _feed(stream: CappedStream, window: Window, chunks: list[DataChunk]) -> list[bytes]:
    """Hand ``chunks`` over as aiortc's receive path does; the messages that came out."""
    out = []
    for chunk in chunks:
        stream.add_chunk(chunk)
        window.held += len(chunk.user_data)
        for _stream_id, _protocol, data in stream.pop_messages():
            window.held -= len(data)
            out.append(data)
    return out


def test_a_message_past_the_cap_is_dropped_and_the_next_is_read() -> None:
    stream, window = _stream()
    big, small = b"x" * 5000, b"y" * 250
    chunks = _fragments(0, 0, big) + _fragments(50, 1, small) + _fragments(53, 2, b"z" * LIMIT)
    assert _feed(stream, window, chunks) == [small, b"z" * LIMIT]  # a message of the cap exactly is read
    assert window.dropped == 1
    assert window.held == 0 and stream.reassembly == []  # all its room handed back: the peer is not stalled


def test_a_dropped_message_holds_no_more_than_the_cap_while_the_rest_of_it_comes() -> None:
    stream, window = _stream()
    most = 0
    for chunk in _fragments(0, 0, b"x" * 100_000):
        _feed(stream, window, [chunk])
        most = max(most, sum(len(c.user_data) for c in stream.reassembly))
    assert most <= LIMIT and window.dropped == 1


def test_out_of_order_fragments_of_a_dropped_message_do_not_stall_the_stream() -> None:
    stream, window = _stream()
    big = _fragments(0, 0, b"x" * 3000)
    small = _fragments(30, 1, b"y" * 150)
    # the small message first, then the big one with its fragments shuffled, the last before a middle one
    order = small + big[:12] + [big[-1]] + big[12:-1]
    assert _feed(stream, window, order) == [b"y" * 150]
    assert window.dropped == 1 and stream.reassembly == [] and window.held == 0


def test_a_dropped_message_a_forward_tsn_passed_is_forgotten_and_its_number_read_when_it_comes_round() -> None:
    """Partial reliability: the peer abandons a message, and the stream moves past it (aiortc sets its sequence
    number directly). Before, the dropped message's number stayed marked, and 65,536 messages on the good message
    that took it was dropped too."""
    stream, window = _stream()
    # message 2 past the cap while 0 and 1 are still on their way: dropped, its number marked for when it is due
    assert _feed(stream, window, _fragments(100, 2, b"x" * 3000)[:15]) == []
    assert window.dropped == 1
    stream.sequence_number = 3  # a FORWARD-TSN past 0, 1 and 2
    assert _feed(stream, window, _fragments(200, 3, b"y" * 150)) == [b"y" * 150]
    stream.sequence_number = 2  # 65,535 messages later, the numbers come round
    assert _feed(stream, window, _fragments(300, 2, b"z" * 150)) == [b"z" * 150]


def test_an_unordered_message_past_the_cap_is_dropped_and_the_next_is_read() -> None:
    stream, window = _stream()
    chunks = _fragments(0, 0, b"x" * 3000, unordered=True) + _fragments(30, 0, b"y" * 150, unordered=True)
    assert _feed(stream, window, chunks) == [b"y" * 150]
    assert window.dropped == 1 and window.held == 0


def test_a_message_is_looked_for_once_per_last_fragment_not_once_per_fragment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work of reassembly: aiortc's scan over the fragments held runs only when one may have completed a
    message, so a message costs work in proportion to its size, not to its square."""
    scans = 0
    scan = InboundStream.pop_messages

    def counted(self: InboundStream) -> Iterator[tuple[int, int, bytes]]:
        nonlocal scans
        scans += 1
        return scan(self)

    monkeypatch.setattr(InboundStream, "pop_messages", counted)
    stream, window = _stream()
    assert _feed(stream, window, _fragments(0, 0, b"x" * 900, size=10)) == [b"x" * 900]
    assert scans == 1


@pytest.fixture
def server_config() -> ServerConfig:
    return ServerConfig(port=0, voice="tone", speed=math.inf, api_key=KEY)


async def test_the_client_drops_a_message_past_its_cap_says_so_and_answers_the_next(
        server_config: ServerConfig) -> None:
    async with serve(server_config) as server:
        settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc")
        async with VoiceSession(settings) as session:
            call = server._calls.find(session.call_id or "")
            assert call is not None and call._channel is not None
            huge = json.dumps({"type": "error", "error": {"message": "x" * 2_000_000}}).encode()
            await send_raw_text(call._channel, huge)  # past the 262144 bytes the client's offer said it takes
            await session.send_text("hello")
            events = await until(session, lambda e: isinstance(e, ResponseFinished))
            assert session.connected
    errors = [e for e in events if isinstance(e, SessionError)]
    assert [e.code for e in errors] == ["malformed_event"]
    assert "more than the 262144 bytes this end takes" in errors[0].message and "dropped unread" in errors[0].message


async def test_the_server_drops_a_callers_message_past_its_cap_says_so_and_answers_the_next(
        server_config: ServerConfig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "voxline.server")
    async with serve(server_config) as server:
        transport = await WebRTCTransport.connect(server.http_url, KEY)
        try:
            huge = json.dumps({"type": "session.update", "session": {"instructions": "x" * 2_000_000}}).encode()
            await send_raw_text(transport._channel, huge)  # past the 262144 bytes the server's answer said it takes
            await transport.send(json.dumps({"type": "session.update",
                                             "session": {"type": "realtime", "instructions": "short"}}))
            seen = []
            async with asyncio.timeout(30):
                while not seen or seen[-1]["type"] != "session.updated":
                    seen.append(json.loads(await transport.recv()))
        finally:
            await transport.close()
    errors = [e["error"] for e in seen if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["event_too_large"]
    assert "more than 262144 bytes" in errors[0]["message"] and "dropped unread" in errors[0]["message"]
    assert seen[-1]["session"]["instructions"] == "short"
    dropped = [r.getMessage() for r in caplog.records if "dropped a data channel message" in r.getMessage()]
    assert len(dropped) == 1 and "\n" not in dropped[0]
