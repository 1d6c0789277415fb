"""A WebRTC call's inbox of server events: a data channel cannot make its sender wait, so what waits unread is
bounded, and nothing that comes after the call ended is queued."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiortc import RTCPeerConnection

from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.frames import DroppedFrame
from voxline.realtime.transports import webrtc
from voxline.realtime.transports.webrtc import WebRTCTransport

EVENT = '{"type":"response.output_text.delta","delta":"' + "x" * 60 + '"}'


@asynccontextmanager
async def transport() -> AsyncIterator[WebRTCTransport]:
    """A transport that never connected: its channel's callbacks are what aiortc calls as messages come."""
    pc = RTCPeerConnection()
    try:
        yield WebRTCTransport(pc, "http://127.0.0.1:9/v1/realtime/calls")
    finally:
        await pc.close()


async def _read(call: WebRTCTransport) -> list[str]:
    read: list[str] = []
    async with asyncio.timeout(5):  # a bound, not a timing
        try:
            while True:
                read.append(await call.recv())
        except ConnectionClosed:
            return read


async def test_a_server_that_sends_faster_than_the_session_reads_ends_the_call_not_the_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, every message went into an unbounded queue: a server that kept sending faster than the session
    read grew the process without limit."""
    monkeypatch.setattr(webrtc, "MAX_UNREAD", 10 * (len(EVENT) + webrtc.MESSAGE_COST))
    async with transport() as call:
        for _ in range(1000):
            call._on_message(EVENT)
        assert call.close_code == 1008
        assert call.close_reason.startswith("the server sent more than ")
        assert call.close_reason.endswith(" MiB of events faster than the session read them")
        assert await _read(call) == [EVENT] * 10  # what came before the bound is read, then the end


async def test_events_read_as_they_come_make_room_and_the_call_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webrtc, "MAX_UNREAD", 10 * (len(EVENT) + webrtc.MESSAGE_COST))
    async with transport() as call:
        for _ in range(1000):
            for _ in range(5):
                call._on_message(EVENT)
            for _ in range(5):
                assert await call.recv() == EVENT
        assert call.close_code is None


async def test_empty_messages_count_against_the_bound_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiortc hands over an empty message as "", whose characters count nothing: before, a server that sent empty
    messages for ever grew the inbox without bound."""
    monkeypatch.setattr(webrtc, "MAX_UNREAD", 100 * webrtc.MESSAGE_COST)
    async with transport() as call:
        for _ in range(webrtc.MAX_UNREAD // webrtc.MESSAGE_COST + 1):
            call._on_message("")
            if call.close_code is not None:
                break
        assert call.close_code == 1008
        assert call._inbox.qsize() <= webrtc.MAX_UNREAD // webrtc.MESSAGE_COST + 1


async def test_a_message_too_large_for_this_end_dropped_after_the_call_ended_is_not_queued() -> None:
    """Before, the note of a message too large to take went into the inbox after the end, as no message does."""
    async with transport() as call:
        call._on_message(EVENT)
        call._lost(1000, "closed by the client")
        call._on_oversize(1, 65536)
        call._on_message(EVENT)
        assert await _read(call) == [EVENT]
        for _ in range(3):  # before, the second recv() after the end handed out the note
            with pytest.raises(ConnectionClosed):
                async with asyncio.timeout(5):
                    text = await call.recv()
                    assert not isinstance(text, DroppedFrame)
