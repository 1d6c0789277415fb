"""What a :class:`~session.VoiceSession` plays into and captures from.

An *output* owns a :class:`~voxline.audio.playout.PlayoutBuffer` and a listener timeline:

* :class:`~voxline.audio.devices.SpeakerSink` — a sound device, timed by its DAC clock;
* :class:`ClockedOutput` — no device: a clock reads one block per 20 ms into an optional
  :class:`~voxline.audio.sinks.Sink` (a WAV file of what the listener heard, a timeline in
  memory, or nothing). Replays, kiosk tests and headless runs use it; ``latency_s`` makes
  it behave like a device that buffers that much audio ahead of the listener.

An *input* is any async iterable of int16 blocks at 24 kHz (:func:`mic_blocks`,
:func:`file_blocks`, :class:`Recording`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Protocol

import numpy as np

import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, run_steps
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.reference import PlayedRing
from voxline.audio.room import RoomEcho
from voxline.audio.sinks import Sink
from voxline.audio.sources import Source

__all__ = ["BLOCK", "ClockedOutput", "Output", "Recording", "echoed_blocks", "file_blocks", "mic_blocks"]

BLOCK = 480  # 20 ms


class Output(Protocol):
    playout: PlayoutBuffer
    discard_blocks: bool
    """True when :meth:`discard_pending` may block (a device abort): the session calls it on a thread."""

    def now(self) -> float:
        """The listener's time, on the clock the playout's ledger uses."""

    def discard_pending(self, cut: Cut) -> bool:
        """Keep audio revoked by a barge-in from ever reaching the listener."""


class ClockedOutput:
    """A device-less output: one block of playout per 20 ms of ``clock`` into ``sink``.

    Listener time 0 is ``origin`` on ``clock`` (default: when :meth:`run` starts). With
    ``latency_s`` each block is handed over that long (in whole blocks) before the listener
    hears it, as a buffering device would; a barge-in then revokes what is still inside.
    """

    def __init__(self, clock: Clock, sink: Sink | None = None, *, block: int = BLOCK, origin: float | None = None,
                 latency_s: float = 0.0, playout: PlayoutBuffer | None = None) -> None:
        self.playout = playout if playout is not None else PlayoutBuffer()
        self._clock = clock
        self._sink = sink
        self._block = block
        self._t0 = origin
        self._ahead = int(round(latency_s * SAMPLE_RATE / block)) * block
        self._k = 0  # the next block to read
        self._buf = np.zeros(block, dtype=np.int16)
        self._silence = np.zeros(block, dtype=np.int16)
        self._silence.flags.writeable = False  # handed to the sink for a block that could only be silent
        self.discard_blocks = False  # a sink's cut is bookkeeping: no thread needed
        self.after_read: Callable[[], None] | None = None
        """Called after every pass that read blocks (a session ticks its core there, with no timer of its own)."""

    def now(self) -> float:
        return 0.0 if self._t0 is None else self._clock.now() - self._t0

    def discard_pending(self, cut: Cut) -> bool:
        if self._sink is not None:
            self._sink.apply_cut(cut.at, cut.end)
        return cut.revoked_samples > 0

    async def run(self) -> None:
        """Play until cancelled.

        Block ``k`` is read once the clock reaches ``origin + k·block``; a pass that came
        late reads every block due by then at once, so a busy loop never leaves the output
        behind real time. On a real clock every output of the loop is read by the loop's stepper
        (:func:`~voxline.base.clock.run_steps`).
        """
        if self._t0 is None:
            self._t0 = self._clock.now()
        await run_steps(self._clock, self._pass, self._t0)

    def _pass(self, now: float) -> float:
        """Read the blocks due at ``now``; the time the next one is due."""
        assert self._t0 is not None
        t0, size, k = self._t0, self._block, self._k
        due = max(k, int((now - t0) * SAMPLE_RATE) // size)  # the last block due now
        buf, playout = self._buf, self.playout
        while k <= due:
            heard_at = (k * size + self._ahead) / SAMPLE_RATE
            if playout.skip_silence(size, heard_at):
                block = self._silence  # nothing pending: no read to make
            else:
                playout.read_into(buf, heard_at)
                block = buf
            if self._sink is not None:
                self._sink.write(heard_at, block)
            k += 1
        self._k = k
        if self.after_read is not None:
            self.after_read()
        return t0 + k * size / SAMPLE_RATE


async def mic_blocks(mic: AsyncIterable[tuple[float, np.ndarray]]) -> AsyncIterator[np.ndarray]:
    """Blocks from :class:`~voxline.audio.devices.MicSource` (``(adc_time, block)`` pairs)."""
    async for _t, block in mic:
        yield block


async def file_blocks(source: Source) -> AsyncIterator[np.ndarray]:
    """Blocks from a paced :class:`~voxline.audio.sources.Source` (e.g. a WAV file as the microphone)."""
    async for frame in source:
        yield frame.samples


class Recording:
    """A recording as the microphone: block ``k`` is handed over once captured, at
    ``origin + (k + 1)·block/24000`` (sample ``n`` is captured at ``origin + n/24000``).

    It is an async iterable of its blocks, each yielded once captured (a late wake-up yields
    every block captured by then at once). A session on a real clock takes them instead as a
    step of the loop's stepper (:attr:`due`, :meth:`take`, :func:`~voxline.base.clock.run_steps`):
    a microphone then costs the loop no task wake-up per block.
    """

    def __init__(self, samples: npt.NDArray[np.int16], clock: Clock, origin: float, block: int = BLOCK) -> None:
        if block < 1:
            raise ValueError("a block must hold at least one sample")
        self.clock = clock
        self._samples = samples
        self._origin = origin
        self._block = block
        self._next = 0  # the first sample not handed over

    @property
    def due(self) -> float | None:
        """When the next block is captured; ``None`` once every block was handed over."""
        n = len(self._samples)
        if self._next >= n:
            return None
        return self._origin + min(self._next + self._block, n) / SAMPLE_RATE

    def take(self, now: float) -> list[np.ndarray]:
        """The blocks captured by ``now`` and not handed over yet, in order."""
        blocks = []
        while (due := self.due) is not None and due <= now:
            blocks.append(self._next_block())
        return blocks

    def _next_block(self) -> np.ndarray:
        block = self._samples[self._next : self._next + self._block]
        self._next += self._block
        return block

    async def __aiter__(self) -> AsyncIterator[np.ndarray]:
        while (due := self.due) is not None:
            if self.clock.now() < due:  # a block already captured (a late wake-up) follows at once
                await self.clock.sleep_until(due)
            yield self._next_block()


async def echoed_blocks(blocks: AsyncIterable[np.ndarray], room: RoomEcho, ring: PlayedRing) -> AsyncIterator[np.ndarray]:
    """Open speakers, simulated: each block plus the room's echo of what the listener heard.

    The blocks must start at listener sample 0 and follow each other without gaps (as
    :class:`Recording` with the output's origin does); each is handed over once
    captured, when everything the echo needs (listener samples at least the room's delay
    older) has been played into ``ring``.
    """
    start = 0
    async for block in blocks:
        yield room.mix(np.asarray(block, dtype=np.int16), ring, start)
        start += len(block)
