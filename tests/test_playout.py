"""PlayoutBuffer with plain numbers: reading, underruns, and barge-in cuts at known instants."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from voxline.audio.ledger import Playing
from voxline.audio.playout import PlayoutBuffer

R = 24000
BLOCK = 480


def t(samples: float) -> float:
    """Listener time (seconds) of a sample index on a timeline starting at 0."""
    return samples / R


def const(n: int, value: int) -> np.ndarray:
    return np.full(n, value, dtype=np.int16)


def three_items() -> PlayoutBuffer:
    buf = PlayoutBuffer()
    buf.enqueue(const(1000, 1000), "A")
    buf.mark_complete("A")
    buf.enqueue(const(500, 2000), "B")
    buf.mark_complete("B")
    buf.enqueue(const(800, 3000), "C")
    buf.mark_complete("C")
    return buf


def read_blocks(buf: PlayoutBuffer, count: int, first: int = 0, block: int = BLOCK) -> np.ndarray:
    return np.concatenate([buf.read(block, t(first + k * block)) for k in range(count)])


def test_three_items_play_in_order_and_the_ledger_follows() -> None:
    buf = three_items()
    out = read_blocks(buf, 6)
    expected = np.concatenate([const(1000, 1000), const(500, 2000), const(800, 3000), const(580, 0)])
    np.testing.assert_array_equal(out, expected)
    assert buf.heard_samples("A", 0, t(0)) == 1  # the sample at the listener counts as heard
    assert buf.heard_samples("A", 0, t(999)) == 1000
    assert buf.heard_samples("B", 0, t(999)) == 0
    assert buf.heard_samples("B", 0, t(1000)) == 1
    assert buf.heard_samples("C", 0, t(2299)) == 800
    assert buf.heard_ms("B", 0, 10.0) == pytest.approx(500 / 24)
    assert buf.playing_at(t(0)) == Playing("A", 0, 0)
    assert buf.playing_at(t(1200.25)) == ("B", 0, 200)
    assert buf.playing_at(t(2300)) is None  # silence after the end
    assert buf.samples_played == 2300 and buf.samples_read == 2880
    assert buf.underrun_events == 0  # everything was complete: idle, not starved
    assert [s.count for s in buf.ledger.segments()] == [1000, 500, 800]


def test_half_sample_rule_at_instants_between_samples() -> None:
    buf = three_items()
    read_blocks(buf, 1)
    assert buf.heard_samples("A", 0, t(9.49)) == 10
    assert buf.heard_samples("A", 0, t(9.51)) == 11  # sample 10 is nearer than sample 9 now
    assert buf.heard_samples("A", 0, t(-0.6)) == 0
    assert buf.playing_at(t(9.49)) == ("A", 0, 9)
    assert buf.playing_at(t(9.51)) == ("A", 0, 10)


def test_interrupt_mid_block_revokes_what_the_device_still_held() -> None:
    buf = three_items()
    read_blocks(buf, 2)  # 960 samples of A handed to the output
    cut = buf.interrupt(t(240), fade_ms=5.0)
    assert cut.playing and cut.item_id == "A" and cut.content_index == 0
    assert cut.heard_samples == 241 + 120  # up to the sample at `at`, plus the 5 ms fade
    assert cut.heard_ms == pytest.approx(361 / 24)
    assert cut.audio_end_ms == 15
    assert cut.received_samples == 1000 and cut.discarded_samples == 639
    assert cut.revoked_samples == 960 - 361
    assert cut.flushed_samples == 40 + 500 + 800
    assert cut.fade_samples == 120 and cut.tail_samples == 0
    assert buf.heard_samples("A", 0, 100.0) == 361
    assert buf.queued_samples == 0
    assert [h.heard_samples for h in buf.heard_items(cut.end)] == [361, 0, 0]
    np.testing.assert_array_equal(buf.read(BLOCK, t(960)), 0)


def test_interrupt_inside_the_fade_of_the_last_block_fades_the_next_samples() -> None:
    buf = three_items()
    read_blocks(buf, 1)  # samples 0..479 handed out
    cut = buf.interrupt(t(470), fade_ms=5.0)
    # heard at `at`: 471 samples; fade slots 471..590; 471..479 already out, 480..590 make the tail
    assert cut.heard_samples == 591 and cut.fade_samples == 120 and cut.tail_samples == 111
    assert buf.pending_tail_samples == 111
    out = buf.read(BLOCK, t(480))
    times = np.arange(480, 591)
    expected = np.rint(1000 * (1 - (times - 470) / 121)).astype(np.int16)
    np.testing.assert_array_equal(out[:111], expected)
    assert out[110] == 8 and np.all(np.diff(out[:111]) <= 0)
    np.testing.assert_array_equal(out[111:], 0)
    assert buf.heard_samples("A", 0, 100.0) == 591
    assert buf.samples_played == 591 and buf.underrun_events == 0


def test_tail_spanning_two_items_is_recorded_for_both() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(500, 1000), "A")
    buf.enqueue(const(500, 2000), "B")
    read_blocks(buf, 1)
    cut = buf.interrupt(t(470), fade_ms=5.0)
    assert cut.item_id == "A" and cut.heard_samples == 500 and cut.discarded_samples == 0
    assert buf.heard_samples("B", 0, cut.end) == 91
    out = buf.read(BLOCK, t(480))
    assert out[19] < 1000 and out[20] > 1000  # A's faded end, then B's faded start
    assert buf.playing_at(t(520)) == ("B", 0, 20)


def test_tail_is_dropped_when_the_output_restarts_elsewhere() -> None:
    buf = three_items()
    read_blocks(buf, 1)
    cut = buf.interrupt(t(470), fade_ms=5.0)
    out = buf.read(BLOCK, t(5000))
    np.testing.assert_array_equal(out, 0)
    assert buf.tail_dropped_samples == cut.tail_samples == 111
    assert buf.heard_samples("A", 0, 100.0) == cut.heard_samples  # counted as heard by design


def test_interrupt_in_an_underrun_gap() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(600, 1000), "A")  # still streaming: more deltas expected
    out = read_blocks(buf, 2)
    assert (out != 0).sum() == 600
    assert buf.underrun_events == 1 and buf.underrun_samples == 360
    read_blocks(buf, 1, first=960)  # the same dry spell: one event
    assert buf.underrun_events == 1 and buf.underrun_samples == 840
    cut = buf.interrupt(t(700), fade_ms=5.0)
    assert not cut.playing and cut.item_id == "A"
    assert cut.heard_samples == 600 and cut.discarded_samples == 0 and cut.tail_samples == 0
    assert cut.fade_samples == 0 and cut.revoked_samples == 0
    assert buf.enqueue(const(100, 1000), "A") is False  # a late delta of the cut item
    assert buf.late_samples == 100 and buf.received_samples("A") == 700
    read_blocks(buf, 1, first=1440)
    assert buf.underrun_events == 1  # idle after a cut


def test_one_item_across_an_underrun_gap_is_still_one_item() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(600, 1000), "A")
    read_blocks(buf, 2)
    buf.enqueue(const(300, 1000), "A")
    read_blocks(buf, 1, first=960)
    assert buf.heard_samples("A", 0, 100.0) == 900
    assert buf.heard_samples("A", 0, t(959)) == 600  # the gap counts for nothing
    assert buf.playing_at(t(700)) is None
    assert buf.playing_at(t(960)) == ("A", 0, 600)
    assert len(buf.ledger.segments()) == 2
    assert buf.underrun_events == 2 and buf.underrun_samples == 360 + 180  # two dry spells


@pytest.mark.parametrize(("fade_ms", "heard"), [(0.0, 481), (5.0, 601)])
def test_interrupt_exactly_on_a_block_boundary(fade_ms: float, heard: int) -> None:
    buf = three_items()
    read_blocks(buf, 2)
    cut = buf.interrupt(t(480), fade_ms=fade_ms)
    assert cut.playing and cut.heard_samples == heard
    assert cut.revoked_samples == 960 - heard


def test_items_revoked_from_the_output_are_closed_too() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(100, 1000), "A")
    buf.mark_complete("A")
    buf.enqueue(const(380, 2000), "B")  # all of B is handed to the output, none of it heard
    buf.mark_complete("B")
    read_blocks(buf, 1)
    cut = buf.interrupt(t(50), fade_ms=0.0)
    assert cut.item_id == "A" and cut.revoked_samples == 429
    assert buf.heard_samples("B", 0, 100.0) == 0
    assert buf.enqueue(const(10, 2000), "B") is False


def test_interrupt_after_the_end_reports_the_last_item() -> None:
    buf = three_items()
    read_blocks(buf, 6)
    cut = buf.interrupt(t(2600))
    assert not cut.playing and cut.item_id == "C"
    assert cut.heard_samples == cut.received_samples == 800
    assert cut.discarded_samples == 0 and cut.revoked_samples == 0 and cut.flushed_samples == 0


def test_interrupt_before_anything_was_heard() -> None:
    buf = three_items()
    cut = buf.interrupt(0.0)
    assert cut.item_id is None and not cut.playing and cut.heard_samples == 0
    assert cut.flushed_samples == 2300
    assert [(h.item_id, h.heard_samples, h.received_samples) for h in buf.heard_items(1.0)] == [
        ("A", 0, 1000),
        ("B", 0, 500),
        ("C", 0, 800),
    ]


def test_interrupt_in_the_past_revokes_down_to_it() -> None:
    buf = three_items()
    read_blocks(buf, 4)  # the output holds 1920 samples; the listener is at sample 100
    cut = buf.interrupt(t(100), fade_ms=0.0)
    assert cut.heard_samples == 101 and cut.revoked_samples == 1920 - 101
    assert [h.heard_samples for h in buf.heard_items(10.0)] == [101, 0, 0]


def test_discard_item_drops_its_queue_and_later_deltas() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(300, 1000), "A")
    buf.enqueue(const(300, 2000), "B")
    assert buf.discard_item("A") == 300
    assert buf.enqueue(const(50, 1000), "A") is False
    out = buf.read(BLOCK, 0.0)
    np.testing.assert_array_equal(out[:300], 2000)
    assert buf.received_samples("A") == 350 and buf.heard_samples("A", 0, 1.0) == 0


def test_clear_drops_the_queue_without_closing_items() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(300, 1000), "A")
    assert buf.clear() == 300
    assert buf.enqueue(const(100, 1000), "A") is True
    read_blocks(buf, 1)
    assert buf.playing_at(0.0) == ("A", 0, 300)  # offsets stay those of the item
    assert buf.underrun_events == 1  # A is still streaming


def test_content_indices_are_separate_parts() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(100, 1000), "A", 0)
    buf.enqueue(const(100, 2000), "A", 1)
    read_blocks(buf, 1)
    assert buf.heard_samples("A", 0, 1.0) == 100 and buf.heard_samples("A", 1, 1.0) == 100
    assert buf.playing_at(t(150)) == ("A", 1, 50)


def test_contiguous_playback_is_one_segment_and_prune_summarises() -> None:
    buf = PlayoutBuffer()
    for _ in range(100):
        buf.enqueue(const(240, 1000), "A")
    buf.enqueue(const(240, 2000), "B")
    read_blocks(buf, 60)
    assert [(s.key, s.count) for s in buf.ledger.segments()] == [(("A", 0), 24000), (("B", 0), 240)]
    buf.prune(before=t(24000))
    assert [s.key for s in buf.ledger.segments()] == [("B", 0)]
    assert buf.heard_samples("A", 0, 5.0) == 24000
    buf.forget("A")
    assert buf.heard_samples("A", 0, 5.0) == 0 and buf.received_samples("A") == 0
    assert [h.item_id for h in buf.heard_items(5.0)] == ["B"]


def test_read_into_a_strided_view_and_odd_sizes() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(np.arange(1, 101, dtype=np.int16), "A")
    frame = np.full((60, 2), -1, dtype=np.int16)
    buf.read_into(frame[:, 0], 0.0)
    np.testing.assert_array_equal(frame[:, 0], np.arange(1, 61))
    np.testing.assert_array_equal(frame[:, 1], -1)
    assert len(buf.read(0, t(60))) == 0
    np.testing.assert_array_equal(buf.read(50, t(60))[:40], np.arange(61, 101))


def test_filter_heard_items_by_id_and_completion_flag() -> None:
    buf = three_items()
    buf.enqueue(const(10, 5), "D")
    items = buf.heard_items(0.0, item_ids={"B", "D"})
    assert [(h.item_id, h.complete) for h in items] == [("B", True), ("D", False)]


def test_enqueue_refuses_non_int16_audio() -> None:
    buf = PlayoutBuffer()
    with pytest.raises(TypeError):
        buf.enqueue(np.zeros(10, dtype=np.float32), "A")
    with pytest.raises(TypeError):
        buf.enqueue(np.zeros((10, 2), dtype=np.int16), "A")


def test_enqueue_copies_its_input() -> None:
    buf = PlayoutBuffer()
    data = const(10, 7)
    buf.enqueue(data, "A")
    data[:] = 0
    np.testing.assert_array_equal(buf.read(10, 0.0), 7)


def test_enqueue_keeps_a_read_only_view_of_bytes_and_copies_anything_writable() -> None:
    buf = PlayoutBuffer()
    wire = np.frombuffer(const(10, 5).tobytes(), dtype=np.int16)  # a decoded delta: immutable
    buf.enqueue(wire, "A")
    locked = const(10, 6)
    locked.flags.writeable = False  # read-only, but its owner's memory can still change
    buf.enqueue(locked, "A")
    shared = [np.shares_memory(chunk.samples, src) for chunk, src in zip(buf._queue, (wire, locked), strict=True)]
    assert shared == [True, False]
    with pytest.raises(ValueError):
        wire.flags.writeable = True
    np.testing.assert_array_equal(buf.read(20, 0.0), [5] * 10 + [6] * 10)


def test_a_cut_frees_no_queued_delta_and_the_reads_after_it_free_them_a_few_at_a_time() -> None:
    import weakref

    buf = PlayoutBuffer()
    deltas = [np.frombuffer(const(2400, k + 1).tobytes(), dtype=np.int16) for k in range(50)]  # 5 s, 50 deltas
    alive = [weakref.ref(d) for d in deltas]
    for d in deltas:
        buf.enqueue(d, "A")
    del deltas, d
    buf.read(BLOCK, 0.0)
    cut = buf.interrupt(t(BLOCK), fade_ms=0.0)
    assert cut.item_id == "A" and buf.queued_samples == 0
    assert sum(r() is not None for r in alive) == 50  # the cut walked and freed none of them
    assert buf.sizes()["spent_chunks"] == 50
    reads = 0
    while buf.sizes()["spent_chunks"]:
        buf.read(BLOCK, t((reads + 1) * BLOCK))
        reads += 1
    assert sum(r() is not None for r in alive) == 0
    assert 10 <= reads <= 30  # a few per read, not all at once, and none kept for good
    assert buf.enqueue(const(10, 9), "A") is False  # the cut part stays closed


def test_the_parts_a_cut_closes_are_those_still_queued_or_playing() -> None:
    buf = PlayoutBuffer()
    buf.enqueue(const(BLOCK, 1), "A")
    buf.enqueue(const(BLOCK, 2), "B")
    buf.enqueue(const(BLOCK, 3), "C")
    buf.read(BLOCK, 0.0)
    buf.read(BLOCK, t(BLOCK))  # A and B handed out, C queued
    buf.interrupt(t(2 * BLOCK) - 0.001, fade_ms=0.0)  # while B plays
    assert buf.enqueue(const(10, 9), "B") is False and buf.enqueue(const(10, 9), "C") is False
    assert buf.enqueue(const(10, 9), "A") is True  # played to its end before the cut: not closed


def test_reader_thread_and_feeding_thread_lose_nothing() -> None:
    buf = PlayoutBuffer()
    source = (np.arange(48000) % 1000 + 1).astype(np.int16)
    played: list[np.ndarray] = []
    stop = threading.Event()

    def reader() -> None:
        k = 0
        while not stop.is_set() or buf.queued_samples:
            played.append(buf.read(BLOCK, t(k * BLOCK)))
            k += 1

    thread = threading.Thread(target=reader)
    thread.start()
    for start in range(0, len(source), 777):
        buf.enqueue(source[start : start + 777], "A")
    stop.set()
    thread.join()
    out = np.concatenate(played)
    np.testing.assert_array_equal(out[out != 0], source)
    assert buf.heard_samples("A", 0, 1e9) == 48000
