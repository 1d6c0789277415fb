"""What the listener heard, by listener sample index: the echo canceller's reference.

:class:`PlayedRing` keeps the last ``keep_s`` seconds of the samples the playout handed out,
placed at their listener time (sample index ``round(t · rate)``). The playout writes into it
as it reads (:meth:`voxline.audio.playout.PlayoutBuffer.attach_reference`) and revokes what a
barge-in kept from the listener, so :meth:`read` answers "what reached the speaker over
``[start, start + n)``" on the same timeline as the microphone. Never-written or revoked
positions read as silence. Work per call is bounded by the block size; nothing allocates
on :meth:`write` (the audio thread's side).
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["PlayedRing"]

Samples = npt.NDArray[np.int16]


class PlayedRing:
    """A ring of played samples indexed by listener sample (see the module docstring)."""

    def __init__(self, keep_s: float = 2.0, rate: int = SAMPLE_RATE) -> None:
        if keep_s <= 0:
            raise ValueError("keep_s must be positive")
        self.rate = rate
        self._size = int(keep_s * rate)
        self._buf = np.zeros(self._size, dtype=np.int16)
        self._high = 0  # one past the highest index written
        self._lock = threading.Lock()

    @property
    def high(self) -> int:
        """One past the last listener sample written."""
        return self._high

    def index(self, t: float) -> int:
        return int(round(t * self.rate))

    def write(self, t: float, samples: Samples) -> None:
        """Samples handed out so that ``samples[0]`` is heard at listener time ``t``."""
        start = self.index(t)
        n = len(samples)
        if n == 0 or start + n <= self._high - self._size:
            return
        with self._lock:
            if start > self._high:  # a gap (silence, or a restart further on): clear it
                self._zero(self._high, min(start, self._high + self._size))
            self._put(start, samples)
            self._high = max(self._high, start + n)

    def revoke_after(self, end: float) -> None:
        """Samples after listener time ``end`` never reached the listener: silence them."""
        first = self.index(end) + 1
        with self._lock:
            if first < self._high:
                self._zero(max(first, self._high - self._size), self._high)

    def read(self, start: int, n: int) -> Samples:
        """Listener samples ``[start, start + n)``; silence where nothing (still) is known."""
        out = np.zeros(max(0, n), dtype=np.int16)
        with self._lock:
            lo, hi = max(start, self._high - self._size, 0), min(start + n, self._high)
            if hi > lo:
                out[lo - start : hi - start] = self._get(lo, hi)
        return out

    # ring arithmetic --------------------------------------------------------------
    def _put(self, start: int, samples: Samples) -> None:
        if len(samples) > self._size:
            start, samples = start + len(samples) - self._size, samples[-self._size :]
        i = start % self._size
        first = min(len(samples), self._size - i)
        self._buf[i : i + first] = samples[:first]
        self._buf[: len(samples) - first] = samples[first:]

    def _zero(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        hi = min(hi, lo + self._size)
        i, j = lo % self._size, hi - lo
        first = min(j, self._size - i)
        self._buf[i : i + first] = 0
        self._buf[: j - first] = 0

    def _get(self, lo: int, hi: int) -> Samples:
        i, j = lo % self._size, hi - lo
        first = min(j, self._size - i)
        return np.concatenate([self._buf[i : i + first], self._buf[: j - first]])
