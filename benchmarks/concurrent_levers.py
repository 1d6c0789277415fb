"""The client's levers, one at a time: hooks that put a session back on the former path.

``python3 -m benchmarks.bench_concurrent --levers-off tick_gate`` (or ``try_recv``) runs the same
workload with that lever undone, so alternating runs measure what each one saves; the server's
levers are measured by running the server of another checkout (``--server-python``).

* ``tick_gate``: the output ticks the session after every pass (a gate that never closes);
* ``try_recv``: every frame is received through websockets' ``recv()`` (a coroutine chain and,
  when its queue is empty, a future each);
* ``barge_peek``: a session waiting for its turn on the loop waits on when a barge-in
  (``input_audio_buffer.speech_started``) is read behind it, and so does every event read ahead of it;
* ``idle_sleep``: the output passes every block even while nothing can play (``idle_s=0``);
* ``clock_read``: the sessions' clock asks the running loop for its time at every read (a system
  call each, asyncio checking the process id) instead of reading ``time.monotonic()``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.tick_gate import TickGate
from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.session import VoiceSession
from voxline.session.settings import SessionSettings
from voxline.session.voice import Connector

__all__ = ["LEVERS", "AlwaysOpenGate", "LoopTimeClock", "clock_for", "hooks"]

LEVERS = ("tick_gate", "try_recv", "barge_peek", "idle_sleep", "clock_read")


class LoopTimeClock(RealClock):
    """The real clock read through the running loop, as it was."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()


def clock_for(off: Sequence[str]) -> RealClock:
    """The sessions' clock with the levers in ``off`` undone."""
    return LoopTimeClock() if "clock_read" in off else RealClock()


class AlwaysOpenGate(TickGate):
    """A gate that never lets a tick be skipped."""

    @property  # type: ignore[override]
    def until(self) -> float:
        return -math.inf

    @until.setter
    def until(self, value: float) -> None:
        pass


def hooks(off: Sequence[str], settings: SessionSettings
          ) -> tuple[Connector | None, Callable[[VoiceSession], None] | None]:
    """The connector and the ``on_session`` hook of a session with the levers in ``off`` undone."""
    unknown = set(off) - set(LEVERS)
    if unknown:
        raise ValueError(f"unknown levers {sorted(unknown)}; known: {', '.join(LEVERS)}")

    async def former() -> RealtimeConnection:
        assert settings.api_key is not None
        conn = await connect(settings.url, settings.api_key.get_secret_value(), model=settings.model)
        if "try_recv" in off:
            conn.transport._messages = None  # type: ignore[attr-defined]  # every frame through websockets' recv()
        if "barge_peek" in off:
            conn._peeks = None  # the session neither sees a barge-in queued nor is told of one read
        return conn

    def former_output(session: VoiceSession) -> None:
        if "tick_gate" in off:
            session.machine.tick_gate = AlwaysOpenGate()
        if "idle_sleep" in off and isinstance(session.output, ClockedOutput):
            session.output._idle_s = 0.0  # a pass every block

    connector = former if {"try_recv", "barge_peek"} & set(off) else None
    return connector, (former_output if {"tick_gate", "idle_sleep"} & set(off) else None)
