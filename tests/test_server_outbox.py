"""The local server's outbox: events written at once in one socket write, in order, and held back while the socket is paused."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.frames import Frame
from websockets.protocol import Protocol, Side, State

from voxline.realtime.server.net.config import FaultConfig, ServerConfig
from voxline.realtime.server.net.ws_session import Outbox


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)


class _Connection:
    """The parts of websockets' ``ServerConnection`` the outbox uses, over a real sans-I/O protocol."""

    def __init__(self) -> None:
        self.protocol = Protocol(Side.SERVER, state=State.OPEN)
        self.transport = _Transport()
        self.paused = False
        self.resumed = asyncio.Event()
        self.sent_by_writer: list[str] = []

    def send_data(self) -> None:
        for data in self.protocol.data_to_send():
            self.transport.write(data)

    async def send(self, text: str) -> None:
        self.sent_by_writer.append(text)

    async def drain(self) -> None:
        if self.paused:
            await self.resumed.wait()


def _frames(data: bytes) -> list[str]:
    reader = Protocol(Side.CLIENT, state=State.OPEN)
    reader.receive_data(data)
    return [e.data.decode() for e in reader.events_received() if isinstance(e, Frame)]


def _events(*names: str) -> list[dict[str, Any]]:
    return [{"type": name, "event_id": f"event_{k}"} for k, name in enumerate(names)]


async def test_a_batch_is_encoded_and_written_in_one_socket_write_in_order() -> None:
    conn = _Connection()
    seen: list[str] = []
    outbox = Outbox(conn, ServerConfig(on_wire=lambda d, t: seen.append(t)))  # type: ignore[arg-type]
    events = _events("response.output_audio_transcript.delta", "response.output_audio.delta", "response.done")
    outbox.put_all(events)
    assert len(conn.transport.writes) == 1 and outbox.writes == 1 and outbox.sent == 3
    assert _frames(conn.transport.writes[0]) == [json.dumps(e) for e in events] == seen
    await asyncio.wait_for(outbox.flush(), 1)


async def test_while_paused_events_wait_for_the_writer_and_later_ones_stay_behind_them() -> None:
    conn = _Connection()
    outbox = Outbox(conn, ServerConfig())  # type: ignore[arg-type]
    conn.paused = True
    first = _events("response.output_audio.delta")
    outbox.put_all(first)
    assert conn.transport.writes == []
    conn.paused = False
    second = _events("input_audio_buffer.speech_started")
    outbox.put_all(second)  # something still waits: no write may overtake it
    assert conn.transport.writes == []
    writer = asyncio.create_task(outbox.run())
    await asyncio.wait_for(outbox.flush(), 1)
    assert conn.sent_by_writer == [json.dumps(e) for e in first + second]
    outbox.put_all(_events("response.done"))  # nothing waits any more: written at once
    assert len(conn.transport.writes) == 1
    writer.cancel()


async def test_room_waits_while_the_socket_is_paused() -> None:
    conn = _Connection()
    outbox = Outbox(conn, ServerConfig())  # type: ignore[arg-type]
    await asyncio.wait_for(outbox.room(), 1)
    conn.paused = True
    waiting = asyncio.create_task(outbox.room())
    await asyncio.sleep(0)
    assert not waiting.done()
    conn.paused = False
    conn.resumed.set()
    await asyncio.wait_for(waiting, 1)


async def test_with_faults_every_event_goes_through_the_writer() -> None:
    conn = _Connection()
    outbox = Outbox(conn, ServerConfig(faults=FaultConfig(drop_after_events=100)))  # type: ignore[arg-type]
    outbox.put_all(_events("response.created"))
    assert conn.transport.writes == [] and outbox.writes == 0
