"""Listener time of device blocks, from PortAudio's DAC timestamps, kept continuous.

PortAudio stamps each output block with ``outputBufferDacTime``: the instant, on the
stream's clock (``Pa_GetStreamTime``), at which the block's first sample reaches the DAC.
Successive stamps jitter by tens of microseconds and drift slowly against the sample
count. :class:`DacTimeline` turns them into a timeline the heard ledger can use:

* while a stamp stays within ``jump`` (2 ms) of where the previous block ended, the block
  starts where the previous one ended, moved towards the stamp by at most ``slew`` (0.4)
  samples: blocks stay contiguous (one ledger segment per item run, a fade tail continues
  into the next block), and the timeline follows drift of up to ``slew·rate/frames``
  samples per second (about 800 ppm for 480-sample blocks);
* a stamp further off (a device underflow, a restarted stream) re-anchors the timeline on
  the stamp and counts a *jump*.

Some hosts report a DAC time of 0; :func:`dac_time` then falls back to the callback's
``currentTime`` (or the stream time) plus the stream's output latency.
"""

from __future__ import annotations

__all__ = ["DacTimeline", "dac_time"]


def dac_time(reported: float, current: float, latency: float) -> float:
    """The block's DAC time; ``current + latency`` when the host reports 0 (or less)."""
    return reported if reported > 0 else current + latency


class DacTimeline:
    """Continuous listener times for successive blocks of one output stream."""

    def __init__(self, rate: int, *, jump: float = 0.002, slew: float = 0.4) -> None:
        self.rate = rate
        self.jump = jump
        self._slew = slew / rate
        self._next: float | None = None
        self.jumps = 0

    def place(self, dac: float, frames: int) -> float:
        """The listener time of a block of ``frames`` samples stamped ``dac``."""
        expected = self._next
        if expected is None or abs(dac - expected) > self.jump:
            if expected is not None:
                self.jumps += 1
            start = dac
        else:
            start = expected + min(max(dac - expected, -self._slew), self._slew)
        self._next = start + frames / self.rate
        return start

    def reset(self) -> None:
        """Forget the timeline (the stream was restarted); the next block anchors it."""
        self._next = None

    @property
    def next_time(self) -> float | None:
        """Listener time right after the last placed block."""
        return self._next
