"""A recording on a real clock is sent from the loop's stepper, written to the socket at once.

Many sessions replaying recordings on one loop would otherwise cost a task wake-up per
block each; :meth:`RealtimeConnection.flush_now` writes what the transport takes without
waiting and leaves the rest, in order, for :meth:`RealtimeConnection.flush`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
import pytest

from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.server import ServerConfig, serve
from voxline.session import SessionSettings, VoiceSession
from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording


class _Gate:
    """A transport that takes ``room`` frames without waiting, then only through ``send``."""

    media = None

    def __init__(self, room: int) -> None:
        self.room = room
        self.wire: list[tuple[str, str]] = []  # (how, frame)
        self.broken = False

    def try_send(self, text: str) -> bool:
        if self.broken:
            raise ConnectionClosed(1006, "the socket failed")
        if self.room <= 0:
            return False
        self.room -= 1
        self.wire.append(("now", text))
        return True

    async def send(self, text: str) -> None:
        self.wire.append(("send", text))

    async def recv(self) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self, code: int = 1000, reason: str = "") -> None:
        pass


async def test_flush_now_writes_what_the_transport_takes_and_leaves_the_rest_in_order() -> None:
    gate = _Gate(room=2)
    seen: list[str] = []
    conn = RealtimeConnection(gate, on_wire=lambda direction, text: seen.append(text))
    for n in range(4):
        conn.protocol.append_audio(bytes([n, 0]))
    assert conn.flush_now() is False
    assert conn.has_data_to_send
    conn.protocol.append_audio(bytes([4, 0]))  # queued after the ones left over
    await conn.flush()
    assert not conn.has_data_to_send
    audio = [base64.b64decode(json.loads(text)["audio"])[0] for _how, text in gate.wire]
    assert audio == [0, 1, 2, 3, 4]
    assert [how for how, _text in gate.wire] == ["now", "now", "send", "send", "send"]
    assert seen == [text for _how, text in gate.wire]  # the observer saw each frame once, in order
    gate.broken = True
    conn.protocol.append_audio(b"\0\0")
    with pytest.raises(ConnectionClosed):
        conn.flush_now()
    assert conn.closed


@pytest.mark.parametrize("sends_now", [True, False])
async def test_a_recording_on_a_real_clock_is_sent_from_the_stepper(sends_now: bool) -> None:
    samples = (np.arange(8 * 960) % 2000).astype(np.int16)  # eight 40 ms chunks
    writers: list[str] = []
    appended: list[bytes] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.append"' in text:
            task = asyncio.current_task()
            writers.append(getattr(task.get_coro(), "__qualname__", "?") if task is not None else "stepper")
            appended.append(base64.b64decode(json.loads(text)["audio"]))

    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        async def connector() -> Any:
            conn = await connect(srv.url, "sk-test", on_wire=on_wire)
            if not sends_now:
                conn.transport.try_send = lambda text: False  # type: ignore[method-assign]
            return conn

        clock = RealClock()
        origin = clock.now()
        session = VoiceSession(SessionSettings(url=srv.url, api_key="sk-test"), clock=clock, connector=connector,
                               output=ClockedOutput(clock, origin=origin), input=Recording(samples, clock, origin))
        async with session:
            for _ in range(1000):  # a guard against the hang, not a timing check
                if session.input_finished:
                    break
                await asyncio.sleep(0.01)
            assert session.input_finished
    assert b"".join(appended) == samples.astype("<i2").tobytes()  # every sample once, in order
    if sends_now:
        assert set(writers) == {"stepper"}  # written in the step, a loop callback: no task woke for a block
    else:
        assert "stepper" not in writers  # a transport that cannot take them now: the flush task sends


class _Backpressure:
    """A socket that writes a frame at once and then, while paused, waits for room (as websockets does)."""

    media = None

    def __init__(self) -> None:
        self.wire: list[int] = []
        self.paused = False
        self.room = asyncio.Event()

    def try_send(self, text: str) -> bool:
        if self.paused:
            return False
        self.wire.append(base64.b64decode(json.loads(text)["audio"])[0])
        return True

    async def send(self, text: str) -> None:
        self.wire.append(base64.b64decode(json.loads(text)["audio"])[0])
        if self.paused:
            await self.room.wait()

    async def recv(self) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self, code: int = 1000, reason: str = "") -> None:
        pass


async def test_a_flush_waiting_on_a_full_socket_and_a_write_now_keep_the_frames_in_order() -> None:
    socket = _Backpressure()
    conn = RealtimeConnection(socket)
    for n in range(3):
        conn.protocol.append_audio(bytes([n, 0]))
    socket.paused = True
    waiting = asyncio.ensure_future(conn.flush())  # writes frame 0, then waits for room
    await asyncio.sleep(0)
    conn.protocol.append_audio(bytes([3, 0]))
    assert conn.flush_now() is False  # no room: nothing written now
    socket.paused = False
    socket.room.set()
    assert conn.flush_now() is True  # room again, before the waiting flush resumes
    await waiting
    assert socket.wire == [0, 1, 2, 3]
