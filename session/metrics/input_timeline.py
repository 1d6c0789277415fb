"""Where the server's input milliseconds fall on the listener timeline (sans-I/O).

The server counts ``audio_start_ms``/``audio_end_ms`` in samples of input audio it was sent on
its connection, not in time: while nothing reaches it (a microphone stream that ended and was
opened again seconds later, blocks a full queue dropped) its count stands still while the
clock runs on. :class:`InputTimeline` keeps the capture time of what was sent in stretches:
sent audio whose capture follows on from the stretch before (within :data:`GAP_S`) extends
it; anything else begins a new one. A server position maps to the capture time inside its
stretch. Each block is checked against where its stretch, run on at the sample rate, puts it
(not against the block before): a hole of one block is found, and so is a capture clock that
drifts from the sample count. Memory is bounded: the oldest stretches are forgotten first, and a
position before the ones kept is placed from the oldest as if nothing had been missed since.
"""

from __future__ import annotations

import bisect

__all__ = ["GAP_S", "InputTimeline"]

GAP_S = 0.01
"""How far a block's capture may lie from where its stretch puts it and still continue it: capture times jitter by
a few milliseconds at most (a fraction of one on a sound server), a gap in the audio (a stream reopened, a block
dropped: 20 ms) is longer."""

_STRETCHES = 256  # kept per connection


class InputTimeline:
    """The capture times of the input audio sent on one connection, by the server's count of it."""

    __slots__ = ("rate", "_firsts", "_times", "_sent")

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._firsts: list[int] = []  # the first sample of each stretch, in the server's count
        self._times: list[float] = []  # the capture time of that sample
        self._sent = 0  # samples sent so far

    def sent_audio(self, samples: int, end: float) -> None:
        """``samples`` more were sent, the last of them captured at ``end``."""
        if samples <= 0:
            return
        start = end - samples / self.rate
        if not self._firsts or abs(start - self._times[-1] - (self._sent - self._firsts[-1]) / self.rate) > GAP_S:
            self._firsts.append(self._sent)
            self._times.append(start)
            if len(self._firsts) > 2 * _STRETCHES:
                del self._firsts[:_STRETCHES], self._times[:_STRETCHES]
        self._sent += samples

    @property
    def sent_ms(self) -> float:
        """How much was sent, in ms of the server's count."""
        return self._sent * 1000 / self.rate

    def at(self, ms: int) -> float | None:
        """The capture time of the server's position ``ms``; None before anything was sent."""
        if not self._firsts:
            return None
        sample = ms * self.rate / 1000
        k = max(0, bisect.bisect_right(self._firsts, sample) - 1)
        return self._times[k] + (sample - self._firsts[k]) / self.rate
