"""The heard ledger: the heard rule, segment bookkeeping, and property tests of the playout
buffer + ledger against a per-sample reference model."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voxline.audio.ledger import HeardLedger, Playing, heard_count
from voxline.audio.playout import PlayoutBuffer

R = 24000


def t(samples: float) -> float:
    return samples / R


# -- the rule and the bookkeeping, with plain numbers ------------------------------------


def test_heard_count_is_the_half_sample_rule() -> None:
    assert heard_count(0.0, 10, t(-0.51), R) == 0
    assert heard_count(0.0, 10, t(-0.49), R) == 1
    assert heard_count(0.0, 10, t(3.0), R) == 4
    assert heard_count(0.0, 10, t(3.49), R) == 4
    assert heard_count(0.0, 10, t(3.51), R) == 5
    assert heard_count(0.0, 10, math.inf, R) == 10
    assert heard_count(1.0, 10, 1.0 + t(2) - 1e-12, R) == 3  # float noise does not move a count


def test_contiguous_records_merge_and_jitter_below_half_a_sample_is_absorbed() -> None:
    ledger = HeardLedger(R)
    ledger.record(("A", 0), 0, 480, 0.0)
    ledger.record(("A", 0), 480, 480, t(480.3))
    assert [(s.offset, s.count) for s in ledger.segments()] == [(0, 960)]
    ledger.record(("A", 0), 960, 480, t(1500))  # a gap: a new segment
    ledger.record(("B", 0), 0, 100, t(1980))  # another item: a new segment
    ledger.record(("B", 0), 200, 100, t(2080))  # not the next offset: a new segment
    assert [(s.key[0], s.offset, s.count) for s in ledger.segments()] == [
        ("A", 0, 960),
        ("A", 960, 480),
        ("B", 0, 100),
        ("B", 200, 100),
    ]
    assert ledger.heard_samples("A", 0, t(1499)) == 960
    assert ledger.heard_samples("A", 0, t(1500)) == 961
    assert ledger.heard_total(10.0) == 1640
    assert ledger.heard_between(t(959), t(1500)) == 1
    assert ledger.keys() == [("A", 0), ("B", 0)]


def test_revoke_after_trims_the_timeline_tail() -> None:
    ledger = HeardLedger(R)
    ledger.record(("A", 0), 0, 1000, 0.0)
    ledger.record(("B", 0), 0, 1000, t(1000))
    assert ledger.revoke_after(t(499.25)) == {("B", 0): 1000, ("A", 0): 500}
    assert ledger.heard_samples("A", 0, 10.0) == 500
    assert ledger.heard_samples("B", 0, 10.0) == 0
    assert ledger.playing_at(t(1200)) is None
    assert ledger.revoke_after(t(499.25)) == {}


def test_playing_and_last_heard() -> None:
    ledger = HeardLedger(R)
    ledger.record(("A", 0), 0, 100, 0.0)
    ledger.record(("B", 2), 0, 100, t(200))
    assert ledger.playing_at(t(50)) == Playing("A", 0, 50)
    assert ledger.playing_at(t(150)) is None
    assert ledger.last_heard(t(150)) == Playing("A", 0, 99)
    assert ledger.last_heard(t(250)) == Playing("B", 2, 50)
    assert ledger.last_heard(t(-5)) is None


def test_prune_keeps_totals_and_forget_drops_an_item() -> None:
    ledger = HeardLedger(R)
    ledger.record(("A", 0), 0, 100, 0.0)
    ledger.record(("A", 0), 100, 100, t(300))
    ledger.record(("B", 0), 0, 100, t(500))
    ledger.prune(before=t(350))  # the first A segment is wholly heard; the second is not
    assert [s.offset for s in ledger.segments()] == [100, 0]
    assert ledger.heard_samples("A", 0, t(350)) == 151
    assert ledger.heard_samples("A", 0, t(1000)) == 200
    ledger.forget("A")
    assert ledger.heard_samples("A", 0, t(1000)) == 0 and ledger.keys() == [("B", 0)]


def test_a_block_recorded_out_of_order_is_still_found() -> None:
    ledger = HeardLedger(R)
    ledger.record(("A", 0), 100, 100, t(100))
    ledger.record(("A", 0), 0, 100, 0.0)
    assert [s.t0 for s in ledger.segments()] == [0.0, t(100)]
    assert ledger.playing_at(t(10)) == ("A", 0, 10)


# -- property tests against a per-sample reference model --------------------------------
# Times in the model are in samples; instants are on the grid or a quarter/three quarters
# off it, so the half-sample rule never meets a tie.

ITEMS = [f"i{k}" for k in range(8)]
VALUE = {item: 10000 + 1000 * k for k, item in enumerate(ITEMS)}
Key = tuple[str, int]
Tag = tuple[Key, int]


@dataclass
class Model:
    queue: deque[Tag] = field(default_factory=deque)
    received: dict[Key, int] = field(default_factory=dict)
    complete: set[Key] = field(default_factory=set)
    closed: set[Key] = field(default_factory=set)
    closed_items: set[str] = field(default_factory=set)
    open: Key | None = None
    lead: int = 0  # the playout's lead: samples a streaming part gathers before it plays
    gathering: bool = True
    waited: int = 0
    last_key: Key | None = None  # the part of the last queued sample played
    starved: bool = False
    underrun_events: int = 0
    underrun_samples: int = 0
    listener: dict[int, Tag] = field(default_factory=dict)  # slot -> tag, heard samples only
    t_ret: int | None = None
    tail: list[Tag] = field(default_factory=list)
    tail_slot: int = 0
    dropped_tail_slots: set[int] = field(default_factory=set)

    def enqueue(self, item: str, n: int) -> bool:
        key = (item, 0)
        offset = self.received.get(key, 0)
        self.received[key] = offset + n
        if key in self.closed or item in self.closed_items:
            return False
        self.queue.extend((key, offset + j) for j in range(n))
        if key not in self.complete:
            self.open = key
        return True

    def read(self, n: int, slot0: int) -> list[Tag | None]:
        out: list[Tag | None] = [None] * n
        pos = 0
        if self.tail and slot0 == self.tail_slot:
            take = min(n, len(self.tail))
            out[:take] = self.tail[:take]
            self.tail, self.tail_slot, pos = self.tail[take:], slot0 + take, take
        elif self.tail:
            for slot in range(self.tail_slot, self.tail_slot + len(self.tail)):
                if slot < slot0:
                    self.dropped_tail_slots.add(slot)  # never played, still counted as heard
                else:
                    del self.listener[slot]  # the new block plays there instead
            self.tail = []
        if self.gathering and (len(self.queue) >= self.lead or self.open is None or self.waited >= self.lead):
            self.gathering = False
        while pos < n and self.queue and not self.gathering:
            out[pos] = self.listener[slot0 + pos] = self.queue.popleft()
            self.last_key = out[pos][0]  # type: ignore[index]
            pos += 1
        if not self.queue:
            self.gathering, self.waited = True, 0
        elif self.gathering:
            self.waited += n
        if pos:
            self.starved = False
        if pos < n and self.open is not None and self.open == self.last_key:  # silence before its audio began: idle
            self.underrun_events += not self.starved
            self.starved = True
            self.underrun_samples += n - pos
        self.t_ret = slot0 + n
        return out

    def playing(self, a: float) -> Tag | None:
        return self.listener.get(math.ceil(a + 0.5) - 1)

    def last_heard(self, a: float) -> Tag | None:
        slots = [s for s in self.listener if s < a + 0.5]
        return self.listener[max(slots)] if slots else None

    def interrupt(self, a: float, fade: int) -> None:
        end = a + fade
        playing = self.playing(a)
        revoked = {tag[0] for s, tag in self.listener.items() if not s < end + 0.5}
        self.listener = {s: tag for s, tag in self.listener.items() if s < end + 0.5}
        self.tail = [tag for j, tag in enumerate(self.tail) if self.tail_slot + j < end + 0.5]
        self.dropped_tail_slots = {s for s in self.dropped_tail_slots if s < end + 0.5}
        if playing is not None and fade > 0 and self.t_ret is not None:
            if not self.tail:
                self.tail_slot = self.t_ret
            while self.queue and (slot := self.tail_slot + len(self.tail)) < end + 0.5:
                self.listener[slot] = self.queue[0]
                self.tail.append(self.queue.popleft())
        closing = {tag[0] for tag in self.queue} | revoked
        closing |= {playing[0]} if playing is not None else set()
        closing |= {self.open} if self.open is not None else set()
        self.closed |= closing
        self.queue, self.open, self.starved = deque(), None, False

    def discard(self, item: str) -> None:
        self.queue = deque(tag for tag in self.queue if tag[0][0] != item)
        self.closed_items.add(item)
        if self.open is not None and self.open[0] == item:
            self.open = None

    def clear(self) -> None:
        self.queue, self.open, self.starved = deque(), None, False

    def mark_complete(self, item: str) -> None:
        self.complete.add((item, 0))
        if self.open == (item, 0):
            self.open = None

    def heard_slots(self, key: Key) -> list[int]:
        return sorted(s for s, tag in self.listener.items() if tag[0] == key)


def op_sequences(scale: int) -> st.SearchStrategy[list[tuple]]:  # type: ignore[type-arg]
    """Rounds of "feed, play, then something happens", so that cuts often land on audio.

    ``scale`` divides block and delta sizes; the fades (24 and 120 samples) stay real.
    """
    enqueue_op = st.tuples(st.just("enqueue"), st.sampled_from(ITEMS), st.integers(0, 1200 // scale))
    read_op = st.tuples(
        st.just("read"),
        st.one_of(st.sampled_from([480 // scale, 480 // scale, 160 // scale, 1]), st.integers(1, 600 // scale)),
        st.sampled_from([0] * 6 + [1, 37, 500 // scale]),
    )
    interrupt_op = st.tuples(
        st.just("interrupt"),
        st.one_of(st.integers(-130, 5), st.integers(-1200 // scale, 300 // scale)),  # mostly near the edge
        st.sampled_from([0.0, 0.25, 0.75]),
        st.sampled_from([0, 24, 120, 120]),
    )
    other_op = st.one_of(
        interrupt_op,
        interrupt_op,
        enqueue_op,
        st.tuples(st.just("complete"), st.sampled_from(ITEMS)),
        st.tuples(st.just("discard"), st.sampled_from(ITEMS)),
        st.tuples(st.just("clear")),
    )
    round_ops = st.tuples(
        st.lists(enqueue_op, max_size=3), st.lists(read_op, min_size=1, max_size=4), st.lists(other_op, max_size=2)
    ).map(lambda parts: [*parts[0], *parts[1], *parts[2]])
    return st.lists(round_ops, min_size=1, max_size=8).map(lambda rounds: [op for r in rounds for op in r])


ops = op_sequences(scale=1)
small_ops = op_sequences(scale=4)


@dataclass
class Harness:
    buf: PlayoutBuffer = field(default_factory=PlayoutBuffer)
    model: Model = field(default_factory=Model)
    heard_out: dict[int, int] = field(default_factory=dict)  # what the output played, per slot
    cut_bounds: dict[Key, int] = field(default_factory=dict)

    def apply(self, op: tuple) -> None:  # type: ignore[type-arg]
        match op:
            case ("enqueue", item, n):
                data = np.full(n, VALUE[item], dtype=np.int16)
                assert self.buf.enqueue(data, item) == self.model.enqueue(item, n)
            case ("complete", item):
                self.buf.mark_complete(item)
                self.model.mark_complete(item)
            case ("read", n, gap):
                slot0 = (self.model.t_ret or 0) + gap
                self.check_read(self.buf.read(n, t(slot0)), self.model.read(n, slot0), slot0)
            case ("interrupt", rel, frac, fade):
                self.interrupt((self.model.t_ret or 0) + rel + frac, fade)
            case ("discard", item):
                self.buf.discard_item(item)
                self.model.discard(item)
            case ("clear",):
                self.buf.clear()
                self.model.clear()

    def check_read(self, out: np.ndarray, expected: list[Tag | None], slot0: int) -> None:
        assert len(out) == len(expected)
        for j, tag in enumerate(expected):
            if tag is None:
                assert out[j] == 0
                continue
            value = VALUE[tag[0][0]]
            assert 0 < out[j] <= value  # the fade tail is quieter, never silent
            self.heard_out[slot0 + j] = int(out[j])
        assert self.buf.underrun_events == self.model.underrun_events
        assert self.buf.underrun_samples == self.model.underrun_samples

    def interrupt(self, a: float, fade: int) -> None:
        model = self.model
        playing = model.playing(a)
        current = playing if playing is not None else model.last_heard(a)
        cut = self.buf.interrupt(t(a), fade_ms=fade * 1000 / R)
        model.interrupt(a, fade)
        end = a + fade
        self.heard_out = {s: v for s, v in self.heard_out.items() if s < end + 0.5}  # the output aborts
        assert cut.playing == (playing is not None)
        if current is None:
            assert cut.item_id is None and cut.heard_samples == 0
        else:
            key = current[0]
            assert (cut.item_id, cut.content_index) == key
            assert cut.heard_samples == bisect_left(model.heard_slots(key), end + 0.5)
            assert cut.heard_samples <= cut.received_samples == model.received[key]
        for key in model.received:
            final = self.buf.heard_samples(*key, math.inf)
            assert final == self.buf.heard_samples(*key, t(end))  # nothing counted after at+fade
            if key in model.closed:
                self.cut_bounds[key] = final

    def check(self, dense: bool = True) -> None:
        buf, model = self.buf, self.model
        for key, bound in self.cut_bounds.items():
            assert buf.heard_samples(*key, math.inf) <= bound  # a cut item never grows again
        assert buf.queued_samples == len(model.queue)
        assert buf.pending_tail_samples == len(model.tail)
        expected = {key: model.heard_slots(key) for key in model.received}
        played = sorted(self.heard_out)
        virtual = sorted(model.dropped_tail_slots | {model.tail_slot + j for j in range(len(model.tail))})
        previous = dict.fromkeys(model.received, 0)
        for a in self.instants(dense):
            total = 0
            for key, received in model.received.items():
                heard = buf.heard_samples(*key, t(a))
                assert heard == bisect_left(expected[key], a + 0.5)
                assert previous[key] <= heard <= received  # monotone in `at`, never above received
                previous[key] = heard
                total += heard
            # Σ heard + silence = elapsed: every heard sample is a non-silent sample the output
            # played, or a fade-tail sample counted as heard before (or without) being played.
            assert total == bisect_left(played, a + 0.5) + bisect_left(virtual, a + 0.5)
            self.check_playing(a)

    def check_playing(self, a: float) -> None:
        playing = self.buf.playing_at(t(a))
        expected = self.model.playing(a)
        assert playing == (None if expected is None else (expected[0][0], expected[0][1], expected[1]))
        for key in self.model.received:
            delta = self.buf.heard_samples(*key, t(a)) - self.buf.heard_samples(*key, t(a - 1))
            assert delta == (1 if playing is not None and playing[:2] == key else 0)

    def instants(self, dense: bool = True) -> list[float]:
        model = self.model
        slots = sorted(set(model.listener) | set(self.heard_out) | model.dropped_tail_slots)
        if not slots:
            return [0.0, 10.0]
        edges = {s for s in slots if s - 1 not in slots or s + 1 not in slots}
        grid = set(range(slots[0] - 3, slots[-1] + 3, 97)) if dense else set()
        offsets = (-1.0, 0.0, 0.25, 0.75) if dense else (0.0, 0.75)
        return sorted({x + f for x in edges | grid for f in offsets})


def _harness(lead: int) -> Harness:
    harness = Harness()
    harness.buf.lead = harness.model.lead = lead
    return harness


@pytest.mark.parametrize("lead", [0, 700])  # audio that comes ahead of time; a track's, gathered first
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=ops)
def test_playout_and_ledger_agree_with_the_reference_model(lead: int, sequence: list[tuple]) -> None:  # type: ignore[type-arg]
    harness = _harness(lead)
    for op in sequence:
        harness.apply(op)
    harness.check()


@pytest.mark.parametrize("lead", [0, 175])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=small_ops)
def test_invariants_hold_after_every_step(lead: int, sequence: list[tuple]) -> None:  # type: ignore[type-arg]
    harness = _harness(lead)
    for op in sequence:
        harness.apply(op)
        harness.check(dense=False)
