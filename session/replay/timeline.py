"""The listener's timeline as written by an output device, including what an abort discards."""

from __future__ import annotations

import numpy as np

from voxline.audio.sinks import cut_timeline

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
        cut_timeline(self.samples, 0, self.written, at, silent_at, RATE)
