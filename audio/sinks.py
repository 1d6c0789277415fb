"""Audio sinks for what the listener hears: a WAV file of the listener's timeline, and nothing.

A sink receives ``write(t, samples)``: int16 mono 24 kHz samples whose first one reaches
the listener at ``t`` seconds on the *input* timeline (``t = 0`` is the capture instant of
input sample 0). :class:`WavSink` puts that sample at index ``round(t·24000)``, so sample
``n`` of the file is what the listener heard while input sample ``n`` was captured; gaps
are silence, and a later write over the same indices replaces them.

:meth:`Sink.apply_cut` is a barge-in seen from the output: samples already written that
the playout buffer revoked are silenced and those in the fade are faded, with the same
rule and gains as :meth:`voxline.audio.playout.PlayoutBuffer.interrupt` (times on the input
timeline too).
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from voxline.audio.ledger import fade_gains, heard_count
from voxline.base.arguments import real, whole
from voxline.base.audio_format import SAMPLE_RATE
from voxline.audio.wavio import MAX_RATE, MIN_RATE, PathLike, WavWriter

__all__ = ["NullSink", "Sink", "TimelineSink", "WavSink", "cut_timeline"]

Samples = npt.NDArray[np.int16]


@runtime_checkable
class Sink(Protocol):
    """Where the listener's audio goes, placed by listener time."""

    def write(self, t: float, samples: Samples) -> None: ...

    def apply_cut(self, at: float, end: float) -> None: ...

    def close(self) -> None: ...


class NullSink:
    """Discards audio; counts it."""

    def __init__(self) -> None:
        self.samples_written = 0

    def write(self, t: float, samples: Samples) -> None:
        self.samples_written += len(samples)

    def apply_cut(self, at: float, end: float) -> None:
        return None

    def close(self) -> None:
        return None


class TimelineSink:
    """The listener's timeline in memory: :attr:`samples` ``[n]`` is heard at ``n / rate`` s."""

    def __init__(self, rate: int = SAMPLE_RATE) -> None:
        self.rate = rate
        self._buf: Samples = np.zeros(rate, dtype=np.int16)
        self._high = 0

    @property
    def samples(self) -> Samples:
        return self._buf[: self._high]

    @property
    def samples_written(self) -> int:
        return self._high

    def write(self, t: float, samples: Samples) -> None:
        start = max(0, round(t * self.rate))
        end = start + len(samples)
        if end > len(self._buf):
            grown = np.zeros(max(end, 2 * len(self._buf)), dtype=np.int16)
            grown[: self._high] = self._buf[: self._high]
            self._buf = grown
        self._buf[start:end] = samples
        self._high = max(self._high, end)

    def apply_cut(self, at: float, end: float) -> None:
        cut_timeline(self._buf, 0, self._high, at, end, self.rate)

    def close(self) -> None:
        return None


class WavSink:
    """The listener's timeline as a 16-bit mono WAV file.

    The last ``keep_s`` seconds stay in memory so that writes may arrive slightly out of
    order and cuts may reach back; anything older is on disk and final. A write or cut
    that reaches further back is clipped; the clipped samples are counted in
    :attr:`late_samples`. At most ``window_s`` seconds are ever held back (written out
    half a second at a time past ``keep_s``), and the file is a valid WAV from the moment it
    is opened, its header counting what is on disk: a process killed outright (SIGKILL)
    leaves a WAV that lacks at most the last ``window_s`` seconds.
    """

    def __init__(self, path: PathLike, rate: int = SAMPLE_RATE, keep_s: float = 1.5, window_s: float = 2.0) -> None:
        real(keep_s, "keep_s")
        real(window_s, "window_s")
        if not 0 < keep_s < window_s:
            raise ValueError("need 0 < keep_s < window_s")
        self.rate = whole(rate, "rate", low=MIN_RATE, high=MAX_RATE)
        self.late_samples = 0
        self._writer = WavWriter(path, rate)
        self._keep = max(1, round(keep_s * rate))
        self._window = max(self._keep + 1, round(window_s * rate))
        self._buf: Samples = np.zeros(2 * self._window, dtype=np.int16)
        self._base = 0  # file index of _buf[0]; everything before it is on disk
        self._high = 0  # one past the highest file index written so far

    @property
    def path(self) -> str:
        return self._writer.path

    @property
    def samples_written(self) -> int:
        """Length of the timeline so far, in samples."""
        return self._high

    def write(self, t: float, samples: Samples) -> None:
        array = np.asarray(samples)
        if array.dtype != np.int16 or array.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {array.dtype} with shape {array.shape}")
        if not math.isfinite(t):
            raise ValueError(f"t takes a finite time, not {t}")
        start = round(t * self.rate)
        if start < self._base:
            skip = min(self._base - start, len(array))
            self.late_samples += skip
            array, start = array[skip:], start + skip
        if not len(array):
            return
        end = start + len(array)
        self._make_room(start, end)
        self._buf[start - self._base : end - self._base] = array
        self._high = max(self._high, end)

    def apply_cut(self, at: float, end: float) -> None:
        """Keep what is heard at ``at``, fade what is heard by ``end``, silence the rest."""
        self.late_samples += cut_timeline(self._buf, self._base, self._high, at, end, self.rate)

    @property
    def held_samples(self) -> int:
        """Samples of the timeline in memory, not yet on disk (never more than ``window_s``)."""
        return self._high - self._base

    def _make_room(self, start: int, end: int) -> None:
        """Past the window, flush all but the last ``keep_s`` to disk; grow so that index ``end`` fits.

        A write far ahead of what is held (a stalled output resuming, a caller's jump) puts the
        gap on disk as silence, a window at a time: memory stays bounded by the window."""
        if end - self._base > self._window:
            # everything before it is final from now on; never any of this write (it may be long)
            flush_to = min(end - self._keep, max(self._high, start))
            held = min(self._high, flush_to)
            if held > self._base:
                self._writer.write(self._buf[: held - self._base])
            for gap in range(held, flush_to, self._window):  # the silence between what was held and the write
                self._writer.write(np.zeros(min(self._window, flush_to - gap), dtype=np.int16))
            kept = max(0, self._high - flush_to)
            self._buf[:kept] = self._buf[flush_to - self._base: flush_to - self._base + kept]
            self._buf[kept:] = 0
            self._base = flush_to
            self._high = max(self._high, flush_to)
        if end - self._base > len(self._buf):
            grown = np.zeros(2 * (end - self._base), dtype=np.int16)
            grown[: len(self._buf)] = self._buf
            self._buf = grown

    def close(self) -> None:
        """Write out the rest and complete the file (closed even if writing the rest fails)."""
        try:
            if self._high > self._base:
                self._writer.write(self._buf[: self._high - self._base])
                self._base = self._high
        finally:
            self._writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def cut_timeline(buf: Samples, base: int, high: int, at: float, end: float, rate: int) -> int:
    """A barge-in on a listener timeline already written (what aborting a device does).

    ``buf[i]`` holds timeline sample ``base + i``; samples up to ``high`` were written.
    What is heard at ``at`` stays, what is heard by ``end`` fades out (the ledger's rule and
    gains), the rest becomes silence. Returns how many samples to cut lay before ``base``.
    """
    heard_at = heard_count(0.0, high, at, rate)  # first index not heard at `at`
    heard_end = heard_count(0.0, high, end, rate)
    fade_from = max(heard_at, base)
    silence_from = max(heard_end, fade_from)
    if silence_from > fade_from:
        times = np.arange(fade_from, silence_from) / rate
        region = buf[fade_from - base : silence_from - base]
        region[:] = np.rint(region * fade_gains(times, at, end, rate)).astype(np.int16)
    buf[silence_from - base : high - base] = 0
    return max(0, base - heard_at)
