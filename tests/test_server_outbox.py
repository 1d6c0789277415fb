"""The local server's outbox: events written at once in one socket write, in order, and held back while the socket is
paused; a client that leaves too much unread is not read from until it catches up."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame
from websockets.protocol import Protocol, Side, State

from voxline.realtime.server.net.config import FaultConfig, ServerConfig
from voxline.realtime.server.net.sideband import Sideband
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.net.ws_session import UNREAD_BYTES, Outbox, run_engine
from voxline.realtime.server.live.hub import LiveHub
from voxline.realtime.server.live.ws import run_live_socket
from tests.support.engine_harness import Harness, fake_voice
from tests.support.live_harness import LiveHarness
from tests.support.loop_passes import Passes


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


class _Unread(_Connection):
    """A client that sends ``frames`` and reads nothing until ``reads`` is set: the socket stays paused till then."""

    remote_address = ("127.0.0.1", 1)
    close_code = None

    def __init__(self, frames: list[str]) -> None:
        super().__init__()
        self.paused = True
        self.frames = frames
        self.taken = 0
        self.reads = asyncio.Event()
        self.hang_up = asyncio.Event()

    async def send(self, text: str) -> None:
        await first_of(self.reads.wait(), self.hang_up.wait())
        if self.hang_up.is_set():
            raise ConnectionClosed(None, None)
        await super().send(text)

    async def drain(self) -> None:  # websockets' returns once the connection is lost
        await first_of(self.reads.wait(), self.hang_up.wait())

    async def close(self, code: int = 1000, reason: str = "") -> None:
        return

    def __aiter__(self) -> _Unread:
        return self

    async def __anext__(self) -> str:
        if self.hang_up.is_set():
            raise StopAsyncIteration
        if self.taken == len(self.frames):
            await self.hang_up.wait()
            raise StopAsyncIteration
        self.taken += 1
        return self.frames[self.taken - 1]


async def _taken_while_unread(conn: _Unread, session: asyncio.Task[None]) -> int:
    """Frames the session took from a client that read nothing; then the client reads, and every frame is taken."""
    passes = Passes()
    while passes.n < 50 and conn.taken < len(conn.frames):
        await asyncio.sleep(0)
    taken = conn.taken
    conn.paused = False
    conn.reads.set()  # the client reads: the session goes on, every frame taken
    async with asyncio.timeout(10):
        while conn.taken < len(conn.frames):
            await asyncio.sleep(0)
    conn.hang_up.set()
    await asyncio.wait_for(session, 10)
    passes.stop()
    return taken


async def test_a_client_that_reads_nothing_is_not_read_from_past_the_unread_limit() -> None:
    audio = base64.b64encode(random.Random(1).randbytes(2 * 1024 * 1024)).decode()  # 2.8 MB once retrieved
    create = {"type": "conversation.item.create",
              "item": {"id": "big", "type": "message", "role": "user", "content": [{"type": "input_audio", "audio": audio}]}}
    retrieve = json.dumps({"type": "conversation.item.retrieve", "item_id": "big"})
    conn = _Unread([json.dumps(create)] + [retrieve] * 30)
    session = asyncio.create_task(run_engine(conn, Harness().engine, ServerConfig(), fake_voice))  # type: ignore[arg-type]
    taken = await _taken_while_unread(conn, session)
    assert taken <= 2 + UNREAD_BYTES // len(audio)  # the answers waiting stay near the limit, not 30 of them


async def test_a_live_client_that_reads_nothing_is_not_read_from_past_the_unread_limit() -> None:
    """A ``session.update`` of a few bytes is answered with the whole session, its instructions with it."""
    instructions = "x" * 2_000_000
    start = {"type": "session.start", "session": {"model": "gpt-live", "instructions": instructions}}
    conn = _Unread([json.dumps(start)] + [json.dumps({"type": "session.update", "session": {}})] * 30)
    engine = LiveHarness().engine
    session = asyncio.create_task(run_live_socket(conn, engine, LiveHub(), ServerConfig(), fake_voice))  # type: ignore[arg-type]
    taken = await _taken_while_unread(conn, session)
    assert taken <= 2 + UNREAD_BYTES // len(instructions)


async def test_a_sideband_that_reads_nothing_is_not_read_from_past_the_unread_limit() -> None:
    """Each frame is answered with a megabyte, as a retrieve of a large item is on a call's sideband."""
    answer = json.dumps({"type": "conversation.item.retrieved", "audio": "x" * 1_000_000})
    conn = _Unread(['{"type": "conversation.item.retrieve", "item_id": "big"}'] * 40)
    sideband = Sideband(conn)  # type: ignore[arg-type]
    serving = asyncio.create_task(sideband.run(lambda frame: sideband.push(answer)))
    taken = await _taken_while_unread(conn, serving)
    assert taken <= 2 + UNREAD_BYTES // len(answer)


async def test_a_client_gone_while_behind_ends_its_session() -> None:
    """Its reader waited for the client to catch up: the writer's end lets it go on, to the end of the session."""
    answer = json.dumps({"type": "conversation.item.retrieved", "audio": "x" * 1_000_000})
    conn = _Unread(['{"type": "conversation.item.retrieve", "item_id": "big"}'] * 40)
    sideband = Sideband(conn)  # type: ignore[arg-type]
    serving = asyncio.create_task(sideband.run(lambda frame: sideband.push(answer)))
    audio = base64.b64encode(random.Random(1).randbytes(2 * 1024 * 1024)).decode()
    create = {"type": "conversation.item.create",
              "item": {"id": "big", "type": "message", "role": "user", "content": [{"type": "input_audio", "audio": audio}]}}
    retrieve = json.dumps({"type": "conversation.item.retrieve", "item_id": "big"})
    realtime = _Unread([json.dumps(create)] + [retrieve] * 30)
    session = asyncio.create_task(run_engine(realtime, Harness().engine, ServerConfig(), fake_voice))  # type: ignore[arg-type]
    passes = Passes()
    while passes.n < 50:
        await asyncio.sleep(0)
    passes.stop()
    assert conn.taken < len(conn.frames) and realtime.taken < len(realtime.frames)  # both wait for their clients
    conn.hang_up.set()
    realtime.hang_up.set()
    await asyncio.wait_for(asyncio.gather(serving, session), 10)
