"""A session's input on its way to the machine: the microphone loop of ``VoiceSession``.

A paced input on a real clock with no capture path (a
:class:`~voxline.audio.recording.SteppedInput`: a :class:`~voxline.audio.recording.Recording`,
a file's or a microphone's blocks) is taken as a step of the loop's stepper
(:func:`~voxline.base.steps.run_steps`) and its appends are written to the socket at once where
the transport can (:meth:`~voxline.realtime.connection.RealtimeConnection.flush_now`): a
session's microphone then costs the loop no task wake-up per block. Any other input is read
block by block. Over WebRTC
the machine hands each block back for the connection's media track.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock
from voxline.base.steps import Step, run_steps
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.transports.base import FillsSilence

from .link import Link
from .machine import NO_EFFECTS, Captured, Effects
from .machine.microphone import block_end
from .machines import Machine
from voxline.audio.recording import SteppedInput

__all__ = ["InputFeed"]

_SPARE_SAMPLES = 960  # two 20 ms frames: how much longer than its queue a track may take to send it
_YIELD_EVERY = 8  # blocks of an input read one after another before the loop is let go to other work


class InputFeed:
    """Blocks of one input into a session's machine and onto its connection (see the module docstring)."""

    def __init__(self, machine: Machine, link: Link, *, now: Callable[[], float],
                 apply: Callable[[Effects], Awaitable[None]], wake_flush: Callable[[], None]) -> None:
        self._machine = machine
        self._link = link
        self._now = now  # listener time
        self._apply = apply
        self._wake_flush = wake_flush
        self.finished = False
        self._track: object = None  # the media track last seen, and itself again if it fills silence
        self._fills: FillsSilence | None = None

    async def run(self, blocks: AsyncIterable[Captured]) -> None:
        """The input to the machine: a paced input on a real clock as a step of the loop's stepper, else block by block."""
        try:
            if (isinstance(blocks, SteppedInput) and self._machine.mic.capture is None
                    and isinstance(blocks.clock, RealClock) and (first := blocks.due) is not None):
                await run_steps(blocks.clock, self._capture_step(blocks), first)
            else:
                # an input that hands over blocks without ever waiting (silence made in a loop) would hold the
                # event loop, and every session on it, for as long as it goes on: a mark queued on the loop says
                # whether it ran since the last block, and after _YIELD_EVERY blocks without, the loop is let go
                loop = asyncio.get_running_loop()
                ran, unyielded = [True], 0

                def mark() -> None:
                    ran[0] = True

                async for item in blocks:
                    if ran[0]:  # the input waited (a microphone, a paced file): nothing to do but look again
                        ran[0], unyielded = False, 0
                        loop.call_soon(mark)
                    elif (unyielded := unyielded + 1) >= _YIELD_EVERY:
                        unyielded = 0
                        await asyncio.sleep(0)
                    effects, waiting = self._captured(item)
                    if effects is not NO_EFFECTS:
                        await self._apply(effects)
                    elif waiting and self._link.conn is not None:
                        with contextlib.suppress(ConnectionClosed):
                            await self._link.conn.flush()
            if self._machine.input_ended(self._now()):  # the input's last chunk
                await self._link.flush()
        finally:
            self.finished = True

    async def track_sent(self, clock: Clock) -> None:
        """Return once the connection's media track has sent the microphone samples it holds (at
        once over a WebSocket, whose appends went out as events): a push-to-talk turn's commit
        waits for its last frames. Waits at most their length and two frames more (a track that
        stalls, or a connection that went away, does not hold the commit)."""
        conn = self._link.conn
        media = conn.transport.media if conn is not None and self._machine.carrying else None
        if media is None:
            return
        deadline = clock.now() + (media.queued_audio_samples + _SPARE_SAMPLES) / SAMPLE_RATE
        while (queued := media.queued_audio_samples) > 0 and (now := clock.now()) < deadline:
            await clock.sleep(min(queued / SAMPLE_RATE, deadline - now))

    def _capture_step(self, blocks: SteppedInput) -> Step:
        """The blocks of ``blocks`` captured by each step's time, sent before the step returns."""
        def step(now: float) -> float | None:
            sent = False
            whole = blocks.due  # when the first block handed over now was whole: a late step hands over several
            for k, block in enumerate(blocks.take(now)):
                if k and whole is not None:
                    whole += len(block[1] if isinstance(block, tuple) else block) / SAMPLE_RATE
                late = 0.0 if whole is None else max(0.0, now - whole)
                sent = self._captured(block, late)[1] or sent
            if sent:
                self._flush_now()
            return blocks.due
        return step

    def _captured(self, item: Captured, late: float = 0.0) -> tuple[Effects, bool]:
        """One block, whole ``late`` seconds ago, through the machine; a WebRTC connection's media track
        takes it as it is."""
        conn = self._link.conn
        media = conn.transport.media if conn is not None and self._machine.carrying else None
        now = self._now()
        if media is not self._track:  # checked once a track: isinstance against a Protocol takes microseconds
            self._track, self._fills = media, media if isinstance(media, FillsSilence) else None
        padded = self._fills.take_padding() if self._fills is not None else 0
        effects, pcm, waiting = self._machine.captured(item, now - late, media=media is not None, padded=padded)
        if pcm is not None and media is not None:
            media.push_audio(pcm, age_s=max(0.0, now - block_end(item, now - late)))
        return effects, waiting

    def _flush_now(self) -> None:
        """The frames queued on the connection, written now where the transport can; the rest by the flush task."""
        conn = self._link.conn
        if conn is None:
            return
        try:
            if conn.flush_now():
                return
        except ConnectionClosed:
            return  # the receive loop sees the close
        self._wake_flush()

