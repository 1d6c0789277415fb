"""The listener's timeline as written by an output device, including what an abort discards."""

from __future__ import annotations

import numpy as np

from audio.ledger import fade_gains

__all__ = ["HeardTimeline"]

RATE = 24_000


class HeardTimeline:
    """Sample ``n`` is what the listener hears at ``n / RATE`` seconds.

    An output with latency writes ahead of the listener; on a barge-in, :meth:`apply_cut`
    does what aborting the device does: samples written past the end of the fade never
    reach the listener, and the fade applies to those written inside it.
    """

    def __init__(self, total: int, block: int) -> None:
        self.samples = np.zeros(total + block, dtype=np.int16)
        self.written = 0  # one past the last sample handed to the output

    def block(self, start: int, n: int) -> np.ndarray:
        """A writable view of ``n`` samples from ``start``; marks them handed to the output."""
        self.written = max(self.written, start + n)
        return self.samples[start : start + n]

    def apply_cut(self, at: float, silent_at: float) -> None:
        start, end = int(np.ceil(at * RATE)), int(np.ceil(silent_at * RATE))
        if end < self.written:
            self.samples[end : self.written] = 0
        lo, hi = max(start, 0), min(end, self.written)
        if hi > lo:
            gains = fade_gains(np.arange(lo, hi) / RATE, at, silent_at, RATE)
            self.samples[lo:hi] = np.rint(self.samples[lo:hi] * gains).astype(np.int16)
