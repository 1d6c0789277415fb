"""The heard ledger: which samples of which item reached the listener, and when.

Times are seconds on the output device's timeline ("listener time"). Sample ``j`` of a
segment that starts at listener time ``t0`` reaches the listener at ``t0 + j/rate``.

**The heard rule.** A sample with listener time ``s`` has been heard at instant ``t`` iff

    s < t + 1/(2·rate)        equivalently   j < (t − t0)·rate + ½  within a segment,

so the sample whose slot ``[s − ½/rate, s + ½/rate)`` contains ``t`` is the one *playing*
at ``t`` and counts as heard; float noise of less than half a sample never moves a count.
:func:`heard_count` is this rule for a run of samples; every count in this module and in
:mod:`voxline.audio.playout` goes through it.

The ledger is a list of segments ``(item, item offset, count, t0)`` in listener-time order,
merged while one item plays contiguously, and indexed per item. It assumes listener times
never go backwards (blocks do not overlap). It is not thread-safe by itself; the playout
buffer guards it with its lock.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["Cut", "HeardItem", "HeardLedger", "ItemKey", "Playing", "Segment", "fade_gains", "heard_count"]

ItemKey = tuple[str, int]  # (item_id, content_index)


def heard_count(t0: float, count: int, at: float, rate: int) -> int:
    """How many of ``count`` samples starting at listener time ``t0`` are heard at ``at``."""
    x = (at - t0) * rate + 0.5
    if x <= 0:
        return 0
    if x >= count:
        return count
    return math.ceil(x)


class Playing(NamedTuple):
    """The sample at the listener at some instant: its item and its offset in that item."""

    item_id: str
    content_index: int
    offset_samples: int


def fade_gains(times: npt.NDArray[np.float64], at: float, end: float, rate: int) -> npt.NDArray[np.float64]:
    """Linear fade-out gains for samples at listener ``times`` in ``(at, end]``.

    1 at ``at``, falling to ``1/(1 + fade·rate)`` on the last faded sample: every sample
    counted as heard keeps some sound.
    """
    return np.clip(1.0 - (times - at) / (end - at + 1.0 / rate), 0.0, 1.0)


@dataclass(frozen=True, slots=True)
class Cut:
    """The result of a barge-in, for ``conversation.item.truncate`` (or delete).

    ``item_id`` is the item playing at ``at`` (``playing=True``) or, in silence, the last
    item heard before ``at`` (``playing=False``); None if nothing was ever heard.
    ``heard_samples`` is final: it includes the fade and is never above ``received_samples``.
    """

    item_id: str | None
    content_index: int
    heard_samples: int
    received_samples: int
    playing: bool
    at: float
    end: float
    fade_samples: int
    tail_samples: int
    revoked_samples: int
    flushed_samples: int
    rate: int = SAMPLE_RATE

    @property
    def heard_ms(self) -> float:
        return self.heard_samples * 1000 / self.rate

    @property
    def discarded_samples(self) -> int:
        """Samples of the item received but never heard (revoked, flushed or dropped)."""
        return self.received_samples - self.heard_samples

    @property
    def audio_end_ms(self) -> int:
        """Whole milliseconds heard, rounded down: the ``audio_end_ms`` to truncate at."""
        return self.heard_samples * 1000 // self.rate


@dataclass(frozen=True, slots=True)
class HeardItem:
    """How much of one item part was heard at some instant, and how much had arrived.

    ``complete`` is True once :meth:`~voxline.audio.playout.PlayoutBuffer.mark_complete` was called.
    """

    item_id: str
    content_index: int
    heard_samples: int
    received_samples: int
    complete: bool
    rate: int = SAMPLE_RATE

    @property
    def heard_ms(self) -> float:
        return self.heard_samples * 1000 / self.rate


@dataclass(slots=True, eq=False)
class Segment:
    """``count`` samples of ``key`` from item offset ``offset``, the first at listener time ``t0``."""

    key: ItemKey
    offset: int
    count: int
    t0: float


def _t0(segment: Segment) -> float:
    return segment.t0


class HeardLedger:
    """Per-item heard counts at any instant, from the segments the output actually played."""

    def __init__(self, rate: int = SAMPLE_RATE) -> None:
        self.rate = rate
        self._half = 0.5 / rate
        self._timeline: list[Segment] = []
        self._by_item: dict[ItemKey, list[Segment]] = {}
        self._settled: dict[ItemKey, int] = {}
        self._started: dict[ItemKey, float] = {}  # listener time of each part's first sample

    # -- recording ---------------------------------------------------------------------

    def record(self, key: ItemKey, offset: int, count: int, t0: float) -> None:
        """Samples ``[offset, offset+count)`` of ``key`` play from listener time ``t0``."""
        if count <= 0:
            return
        if offset == 0:
            self._started.setdefault(key, t0)
        timeline = self._timeline
        last = timeline[-1] if timeline else None
        if (
            last is not None
            and last.key == key
            and last.offset + last.count == offset
            and abs(last.t0 + last.count / self.rate - t0) <= self._half
        ):
            last.count += count
            return
        segment = Segment(key, offset, count, t0)
        if last is None or t0 >= last.t0:
            timeline.append(segment)
        else:
            bisect.insort_right(timeline, segment, key=_t0)
        self._by_item.setdefault(key, []).append(segment)

    def revoke_after(self, end: float) -> dict[ItemKey, int]:
        """Un-record every sample not heard at ``end`` (discarded by the output); per-item counts."""
        revoked: dict[ItemKey, int] = {}
        timeline = self._timeline
        while timeline:
            segment = timeline[-1]
            keep = heard_count(segment.t0, segment.count, end, self.rate)
            if keep == segment.count:
                break
            revoked[segment.key] = revoked.get(segment.key, 0) + segment.count - keep
            if keep:
                segment.count = keep
                break
            timeline.pop()
            self._by_item[segment.key].remove(segment)
        return revoked

    def prune(self, before: float) -> None:
        """Summarise segments wholly heard by ``before`` into per-item totals.

        Afterwards, instants earlier than ``before`` see pruned samples as heard and
        :meth:`playing_at` no longer finds them.
        """
        done = 0
        for segment in self._timeline:
            if heard_count(segment.t0, segment.count, before, self.rate) < segment.count:
                break
            self._settled[segment.key] = self._settled.get(segment.key, 0) + segment.count
            self._by_item[segment.key].remove(segment)
            done += 1
        del self._timeline[:done]

    def forget(self, item_id: str) -> None:
        """Drop everything about ``item_id`` (all content parts)."""
        self._timeline = [s for s in self._timeline if s.key[0] != item_id]
        for table in (self._by_item, self._settled, self._started):
            for key in [k for k in table if k[0] == item_id]:
                del table[key]

    # -- queries -----------------------------------------------------------------------

    def heard_samples(self, item_id: str, content_index: int, at: float) -> int:
        """Samples of the item whose listener time is heard at ``at`` (see the heard rule)."""
        key = (item_id, content_index)
        total = self._settled.get(key, 0)
        for segment in self._by_item.get(key, ()):
            total += heard_count(segment.t0, segment.count, at, self.rate)
        return total

    def started_at(self, item_id: str, content_index: int = 0) -> float | None:
        """Listener time of the part's first sample, once it was handed to the output."""
        return self._started.get((item_id, content_index))

    def heard_ms(self, item_id: str, content_index: int, at: float) -> float:
        return self.heard_samples(item_id, content_index, at) * 1000 / self.rate

    def heard_total(self, at: float) -> int:
        """Samples of all items heard at ``at``."""
        total = sum(self._settled.values())
        return total + sum(heard_count(s.t0, s.count, at, self.rate) for s in self._timeline)

    def heard_between(self, start: float, end: float) -> int:
        """Samples heard at ``end`` but not yet at ``start`` (all items)."""
        total = 0
        for segment in reversed(self._timeline):
            before = heard_count(segment.t0, segment.count, start, self.rate)
            total += heard_count(segment.t0, segment.count, end, self.rate) - before
            if before == segment.count:
                break
        return total

    def playing_at(self, at: float) -> Playing | None:
        """The item sample at the listener at ``at``; None in silence or an underrun gap."""
        index = bisect.bisect_right(self._timeline, at + self._half, key=_t0)
        for segment in self._timeline[max(0, index - 2) : index][::-1]:
            x = (at - segment.t0) * self.rate + 0.5
            if 0 < x <= segment.count:
                return Playing(segment.key[0], segment.key[1], segment.offset + math.ceil(x) - 1)
        return None

    def last_heard(self, at: float) -> Playing | None:
        """The most recent item sample heard at ``at`` (playing or already finished)."""
        index = bisect.bisect_right(self._timeline, at + self._half, key=_t0)
        for i in range(index - 1, -1, -1):
            segment = self._timeline[i]
            heard = heard_count(segment.t0, segment.count, at, self.rate)
            if heard:
                return Playing(segment.key[0], segment.key[1], segment.offset + heard - 1)
        return None

    def audio_end(self) -> float:
        """Listener time right after the last item sample recorded (-inf when none is)."""
        timeline = self._timeline
        if not timeline:
            return -math.inf
        last = timeline[-1]
        return last.t0 + last.count / self.rate

    def wholly_heard(self, item_id: str, content_index: int, at: float) -> bool:
        """True when every recorded sample of the part is heard at ``at`` (nothing still to play)."""
        segments = self._by_item.get((item_id, content_index), ())
        return all(heard_count(s.t0, s.count, at, self.rate) == s.count for s in segments)

    def sizes(self) -> dict[str, int]:
        """Entries per table: timeline segments, parts with live segments, parts with pruned totals."""
        return {"segments": len(self._timeline), "items": len(self._by_item), "settled": len(self._settled)}

    def keys(self) -> list[ItemKey]:
        """Every item part the ledger knows, in order of first playback."""
        return list(dict.fromkeys([*self._settled, *self._by_item]))

    def segments(self) -> list[Segment]:
        """A copy of the timeline (for inspection and tests)."""
        return [Segment(s.key, s.offset, s.count, s.t0) for s in self._timeline]
