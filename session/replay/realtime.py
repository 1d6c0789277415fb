"""``voxline replay`` in real time: a real connection, paced by a clock.

Three tasks in one TaskGroup: *capture* appends each 20 ms input block once the clock
has passed its end; *playback* is the listener's output, reading one block of playout
at each block boundary into the heard timeline; *receive* feeds server events to the
session core. A barge-in in the middle of a block aborts what that block had not yet
played: the heard timeline is silenced from the end of the fade, as a device abort would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from voxline.base.clock import Clock
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed

from ..core import SessionCore
from ..track_audio import TrackTagger
from ..events import BargeIn
from .result import ReplayResult
from .timeline import HeardTimeline

__all__ = ["run_realtime"]

RATE = 24_000
BLOCK = 480


async def run_realtime(
    conn: RealtimeConnection,
    samples: np.ndarray,
    *,
    session: dict[str, Any],
    clock: Clock,
    tail_s: float = 120.0,
    track: TrackTagger | None = None,
) -> ReplayResult:
    """Replay ``samples`` over ``conn`` at the pace of ``clock``; returns when all is heard.

    Over WebRTC pass the connection's :class:`~voxline.session.track_audio.TrackTagger` (whose playout
    receives the remote track); the microphone then goes out on the media track.
    """
    playout = track.playout if track is not None else PlayoutBuffer()
    core = SessionCore(conn.protocol, playout, track=track)
    push_audio = getattr(conn.transport, "push_audio", None) if track is not None else None
    timeline = HeardTimeline(len(samples) + int(tail_s * RATE), BLOCK)
    events: list[Any] = []
    t0 = clock.now()
    input_done = asyncio.Event()

    def now() -> float:
        return clock.now() - t0

    def collect() -> None:
        for event in core.events():
            if isinstance(event, BargeIn):
                timeline.apply_cut(event.at, event.at + event.reaction_s)
            events.append(event)

    conn.protocol.update_session(session)
    await conn.flush()

    async def capture() -> None:
        for k in range(0, len(samples), BLOCK):
            await clock.sleep_until(t0 + (k + BLOCK) / RATE)
            block = np.ascontiguousarray(samples[k : k + BLOCK], dtype="<i2")
            if push_audio is not None:
                push_audio(block)  # WebRTC: the media track, not input_audio_buffer.append
                continue
            conn.protocol.append_audio(block.tobytes())
            await conn.flush()
        input_done.set()

    async def playback() -> None:
        k = 0
        limit = len(timeline.samples) - BLOCK
        while k < limit:
            await clock.sleep_until(t0 + k / RATE)
            playout.read_into(timeline.block(k, BLOCK), k / RATE)
            core.tick(k / RATE)
            collect()
            k += BLOCK
            if (input_done.is_set() and not conn.protocol.response_in_progress and playout.queued_samples == 0
                    and not (track is not None and (track.audible or track.server_playing))):
                break
        await conn.close()

    async def receive() -> None:
        while True:
            try:
                out = await conn.recv()
            except ConnectionClosed:
                return
            core.handle(out, now())
            collect()
            await conn.flush()

    async with asyncio.TaskGroup() as tg:
        tg.create_task(capture())
        tg.create_task(playback())
        tg.create_task(receive())
    end = max(len(samples), timeline.written)
    return ReplayResult(timeline.samples[:end], events, playout.underrun_events, playout.underrun_samples)
