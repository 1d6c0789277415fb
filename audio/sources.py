"""Audio sources: async iterators of :class:`AudioFrame` (int16 mono, 24 kHz), paced by a clock.

A source hands out block ``k`` (samples ``k·block … (k+1)·block − 1``) at clock time
``started_at + k·block/24000``, where ``started_at`` is the clock time of the first
``__anext__`` call: the capture instant of the block's first sample. Sample ``n`` of a
source is captured at ``started_at + n/24000``; :attr:`AudioFrame.t` is that instant on
the input timeline (seconds since the first sample).

WAV files are read with the standard library's ``wave`` module (see :mod:`voxline.audio.wavio`),
resampled to 24 kHz with :class:`~voxline.audio.resample.StreamResampler` and downmixed to mono.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from voxline.base.clock import Clock
from voxline.base.audio_format import SAMPLE_RATE
from voxline.audio.resample import StreamResampler
from voxline.audio.wavio import PathLike, WavReader

__all__ = ["AudioFrame", "SilenceSource", "Source", "WavFileSource"]

Samples = npt.NDArray[np.int16]


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """A block of int16 mono 24 kHz samples; ``index`` is its first sample's index in the stream."""

    index: int
    samples: Samples

    @property
    def t(self) -> float:
        """Input-timeline instant of the first sample, in seconds."""
        return self.index / SAMPLE_RATE

    @property
    def end_index(self) -> int:
        return self.index + len(self.samples)


@runtime_checkable
class Source(Protocol):
    """What the session reads the user's audio from."""

    started_at: float | None

    def __aiter__(self) -> Source: ...

    async def __anext__(self) -> AudioFrame: ...

    def close(self) -> None: ...


class _PacedSource:
    """Common pacing: block ``k`` is handed out at ``started_at + k·block/SAMPLE_RATE``.

    Read either as an async iterator or, with no task of its own, by a stepper
    (:func:`~voxline.base.steps.run_steps`): :attr:`due` says when the next block is, and
    :meth:`take` hands out every block due by then (their samples), at the same instants.
    """

    def __init__(self, clock: Clock, block: int) -> None:
        if block <= 0:
            raise ValueError(f"block must be positive, got {block}")
        self.block = block
        self.started_at: float | None = None
        self._clock = clock
        self._index = 0
        self._closed = False

    def __aiter__(self) -> Self:
        return self

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def due(self) -> float | None:
        """When the next block is handed out (now, before the first); None once the source is over."""
        if self._closed:
            return None
        if self.started_at is None:
            return self._clock.now()
        return self.started_at + self._index / SAMPLE_RATE

    def take(self, now: float) -> list[Samples]:
        """The samples of every block due by ``now``, in order; the source is closed at its end."""
        if self.started_at is None and not self._closed:
            self.started_at = now
        out: list[Samples] = []
        while (due := self.due) is not None and due <= now:
            samples = self._next_block()
            if samples is None or len(samples) == 0:
                self.close()
                break
            out.append(samples)
            self._index += len(samples)
        return out

    async def __anext__(self) -> AudioFrame:
        samples = None if self._closed else self._next_block()
        if samples is None or len(samples) == 0:
            self.close()
            raise StopAsyncIteration
        if self.started_at is None:
            self.started_at = self._clock.now()
        await self._clock.sleep_until(self.started_at + self._index / SAMPLE_RATE)
        frame = AudioFrame(self._index, samples)
        self._index += len(samples)
        return frame

    def _next_block(self) -> Samples | None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SilenceSource(_PacedSource):
    """Zeros, forever or for ``duration`` seconds (the last block may be shorter)."""

    def __init__(self, clock: Clock, block: int = 480, duration: float | None = None) -> None:
        super().__init__(clock, block)
        self._total = None if duration is None else round(duration * SAMPLE_RATE)

    def _next_block(self) -> Samples | None:
        size = self.block if self._total is None else min(self.block, self._total - self._index)
        return np.zeros(size, dtype=np.int16) if size > 0 else None


class WavFileSource(_PacedSource):
    """A WAV file played as if it were a microphone; the last block may be shorter.

    The file is opened here, so an unreadable or non-PCM file raises
    :class:`~voxline.base.errors.AudioError` at construction.
    """

    _READ_FRAMES = 4096

    def __init__(self, path: PathLike, clock: Clock, block: int = 480) -> None:
        super().__init__(clock, block)
        self._reader = WavReader(path)
        self.path = self._reader.path
        self.file_rate = self._reader.rate
        self.channels = self._reader.channels
        self._resampler = StreamResampler(self.file_rate, SAMPLE_RATE)
        self._pending: Samples = np.zeros(0, dtype=np.int16)
        self._eof = False

    @property
    def duration(self) -> float:
        """Length of the file in seconds."""
        return self._reader.duration

    def _next_block(self) -> Samples | None:
        while len(self._pending) < self.block and not self._eof:
            chunk = self._reader.read(self._READ_FRAMES)
            self._eof = len(chunk) == 0
            resampled = self._resampler.process(chunk, last=self._eof)
            if len(resampled):
                self._pending = np.concatenate([self._pending, resampled])
        block, self._pending = self._pending[: self.block], self._pending[self.block :]
        return block if len(block) else None

    def close(self) -> None:
        if not self._closed:
            self._reader.close()
        super().close()
