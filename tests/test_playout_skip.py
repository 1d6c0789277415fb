"""A silent block skipped (PlayoutBuffer.skip_silence) leaves the playout as a read would.

Two playouts take the same enqueues, completions, cuts and retires; one reads every block,
the other skips each block it may. What the listener gets, what the ledger says was heard,
the underruns, the cut instants and the tables must be the same after every step.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.reference import PlayedRing

RATE = 24_000
BLOCK = 480

_op = st.one_of(
    st.tuples(st.just("enqueue"), st.integers(1, 2000), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("complete"), st.just(0), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("read"), st.integers(1, 6), st.just("")),
    # a cut within the last block read (ms back from its end), with a fade that may outlast a block
    st.tuples(st.just("cut"), st.integers(0, 19), st.sampled_from(["0", "5", "60"])),
    st.tuples(st.just("retire"), st.just(0), st.just("")),
    st.tuples(st.just("hold"), st.booleans(), st.just("")),
    st.tuples(st.just("ring"), st.just(0), st.just("")),  # echo cancellation starts listening
)


def _state(buf: PlayoutBuffer, now: float) -> tuple[object, ...]:
    heard = tuple(buf.heard_samples(item, 0, now) for item in "abc")
    return (heard, buf.underrun_events, buf.underrun_samples, buf.queued_samples, buf.pending_tail_samples,
            buf.audio_until(), buf.next_time, buf.samples_read, buf.sizes())


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, min_size=1, max_size=60))
def test_a_skipped_block_is_a_silent_read(ops: list[tuple[str, object, str]]) -> None:
    read, skipped = PlayoutBuffer(), PlayoutBuffer()
    rings: list[PlayedRing] = []
    k = 0  # the next block
    for kind, value, item in ops:
        now = k * BLOCK / RATE
        for buf in (read, skipped):
            match kind:
                case "enqueue":
                    assert isinstance(value, int)
                    buf.enqueue(np.full(value, 1000 + ord(item), np.int16), item)
                case "complete":
                    buf.mark_complete(item)
                case "cut":
                    assert isinstance(value, int)
                    buf.interrupt(max(0.0, now - value / 1000), fade_ms=float(item))
                case "retire":
                    buf.retire(now)
                case "hold":
                    buf.hold() if value else buf.release()
                case "ring" if len(rings) < 2:
                    rings.append(PlayedRing())
                    buf.attach_reference(rings[-1])
        if kind == "read":
            assert isinstance(value, int)
            for _ in range(value):
                at = k * BLOCK / RATE
                plain = read.read(BLOCK, at)
                if skipped.skip_silence(BLOCK, at):
                    assert not plain.any()  # skipped only where a read gives silence
                else:
                    assert np.array_equal(skipped.read(BLOCK, at), plain)
                k += 1
        assert _state(read, k * BLOCK / RATE) == _state(skipped, k * BLOCK / RATE)
        if len(rings) == 2:  # the echo reference got every block, silence included
            assert rings[0].high == rings[1].high and np.array_equal(rings[0].read(0, rings[0].high),
                                                                     rings[1].read(0, rings[1].high))


def test_only_a_playout_with_nothing_pending_skips() -> None:
    buf = PlayoutBuffer()
    assert buf.skip_silence(BLOCK, 0.0)  # nothing ever queued
    buf.enqueue(np.full(BLOCK, 500, np.int16), "a")
    assert not buf.skip_silence(BLOCK, BLOCK / RATE)  # audio queued: it must be read
    buf.read(BLOCK, BLOCK / RATE)
    assert not buf.skip_silence(BLOCK, 2 * BLOCK / RATE)  # open: an underrun, counted by a read
    buf.mark_complete("a")
    assert buf.skip_silence(BLOCK, 2 * BLOCK / RATE)
    assert buf.samples_read == 3 * BLOCK and buf.next_time == 3 * BLOCK / RATE


def test_a_fade_longer_than_a_block_and_chunks_left_to_free_are_read_not_skipped() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(np.full(5000, 1000, np.int16), "a")
    buf.read(BLOCK, 0.0)
    buf.interrupt(BLOCK / RATE - 0.005, fade_ms=60.0)  # 60 ms of fade: three blocks of tail
    buf.read(BLOCK, BLOCK / RATE)
    assert buf.pending_tail_samples and not buf.skip_silence(BLOCK, 2 * BLOCK / RATE)
    flushed = PlayoutBuffer()
    for _ in range(8):
        flushed.enqueue(np.full(100, 1000, np.int16), "a")
    flushed.read(50, 0.0)
    flushed.interrupt(0.0, fade_ms=0.0)  # eight chunks flushed, freed a few per read
    flushed.read(BLOCK, 50 / RATE)
    assert flushed.sizes()["spent_chunks"] and not flushed.skip_silence(BLOCK, (50 + BLOCK) / RATE)
