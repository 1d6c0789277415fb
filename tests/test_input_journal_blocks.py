"""The input journal's audio against the whole capture: blocks of any size, commits, trims and resumes.

The journal holds captured blocks and hands out views of them (a committed turn, the audio
to send again after a drop). Whatever the block sizes and however many blocks were forgotten,
each must be exactly the samples of the whole capture between the instants the server named.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.realtime import events as ev
from voxline.session.input_journal import InputJournal

RATE = 24_000
PADDING_MS = 20
KEEP_S = 0.25  # short, so the journal forgets blocks (and compacts what it holds) within a test

_capture = st.tuples(st.just("capture"), st.lists(st.integers(1, 1500), min_size=20, max_size=60))
_step = st.one_of(  # mostly runs of blocks: a test forgets and compacts a hundred blocks or more
    _capture, _capture, _capture,
    st.tuples(st.just("start"), st.integers(0, 400)),  # ms back from the end of the capture
    st.tuples(st.just("stop"), st.integers(0, 400)),
    st.tuples(st.just("commit"), st.just(0)),
    st.tuples(st.just("resume"), st.booleans()),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_step, min_size=12, max_size=60))
def test_turns_and_resumes_are_the_samples_the_server_named(steps: list[tuple[str, object]]) -> None:
    journal = InputJournal(padding_ms=PADDING_MS, lead_in_ms=50, keep_s=KEEP_S, turns_s=60.0, rate=RATE)
    keep = int(KEEP_S * RATE)
    captured: list[np.ndarray] = []
    whole = np.zeros(0, dtype=np.int16)
    origin = commit_point = 0  # absolute samples: the server's 0 ms, the first sample not committed
    heard = 0  # samples captured when the server last spoke: what came after it may never have had
    start: int | None = None
    end: int | None = None
    carried = False
    turns: dict[str, np.ndarray] = {}
    for index, (kind, value) in enumerate(steps):
        total = len(whole)
        if kind == "capture":
            assert isinstance(value, list)
            for size in value:
                block = ((np.arange(total, total + size) * 7919) % 65_521 - 32_760).astype(np.int16)
                journal.captured(block)
                captured.append(block)
                total += size
                commit_point = max(commit_point, total - keep)
            whole = np.concatenate(captured)
        elif kind in ("start", "stop"):
            assert isinstance(value, int)
            heard = total
            at = max(total - value * RATE // 1000, origin)
            ms = (at - origin) * 1000 // RATE
            if kind == "start":
                journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=ms, item_id=f"t{index}"))
                at = origin + ms * RATE // 1000  # the padding is in audio_start_ms already
                # a turn begun before on this connection and not committed goes on; one carried over from the
                # connection before is replaced by this one's own start
                start, end = (at if start is None or carried else min(start, at)), None
                carried = False
            else:
                journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=ms, item_id=f"t{index}"))
                end = origin + ms * RATE // 1000
        elif kind == "commit":
            heard = total
            item = f"c{index}"
            journal.handle(ev.InputAudioBufferCommitted(item_id=item))
            stop = end if end is not None else total
            first = max(commit_point, start) if start is not None else commit_point
            if stop > first:
                turns[item] = whole[first:stop]
                assert np.array_equal(np.frombuffer(journal.audio_of(item) or b"", dtype="<i2"), turns[item])
            commit_point = max(commit_point, stop)
            start = end = None
        else:
            sent = journal.resume(push_to_talk=bool(value))
            if start is not None:
                first = start
            elif value:
                first = commit_point
            else:  # all since the server last spoke, after a lead-in
                first = heard - 50 * RATE // 1000
            first = max(first, commit_point, 0)
            assert np.array_equal(sent, whole[first:total])
            origin = first
            carried = start is not None
        sizes = journal.sizes()
        assert sizes["held"] <= max(len(whole) - commit_point, 0) + 1500  # at most a block more
        held_blocks = sum(1 for at in np.cumsum([0] + [len(b) for b in captured])[:-1] if at + 1500 > commit_point)
        assert sizes["blocks"] <= 2 * held_blocks + 65  # forgotten blocks are let go of, a half at a time
    for item, audio in turns.items():  # the views of a turn outlive the blocks the journal forgot
        assert np.array_equal(np.frombuffer(journal.audio_of(item) or b"", dtype="<i2"), audio)


def test_filler_longer_than_the_journal_keeps_only_moves_the_timeline_on() -> None:
    """An hour of a track's filler holds no more than the journal keeps, and speech after it is found where the
    server placed it."""
    journal = InputJournal(padding_ms=0, keep_s=1.0)
    journal.captured(np.full(24_000, 1, np.int16))
    journal.padded(3600 * 24_000)
    journal.captured(np.full(2_400, 2, np.int16))
    assert journal.sizes()["held"] <= 24_000 + 2_400
    journal.handle(ev.InputAudioBufferSpeechStarted(type="input_audio_buffer.speech_started", audio_start_ms=3601_000,
                                                    item_id="u"))
    said = np.concatenate([np.zeros(4_800, np.int16), np.full(2_400, 2, np.int16)])  # from the margin before it
    assert np.array_equal(journal.resume(push_to_talk=False, speech_only=True), said)


def test_a_turn_the_server_ends_inside_filler_not_counted_yet_ends_where_the_journal_does() -> None:
    """The server counts a track's filler as it goes; the journal learns of it with the next block. A commit placed
    inside it takes what is held, and speech after the filler is still found where the server placed it."""
    journal = InputJournal(padding_ms=0)
    journal.captured(np.full(24_000, 1, np.int16))
    for event in (ev.InputAudioBufferSpeechStarted(type="input_audio_buffer.speech_started", audio_start_ms=200,
                                                   item_id="u1"),
                  ev.InputAudioBufferSpeechStopped(type="input_audio_buffer.speech_stopped", audio_end_ms=1500,
                                                   item_id="u1"),
                  ev.InputAudioBufferCommitted(type="input_audio_buffer.committed", item_id="u1")):
        journal.handle(event)
    assert journal.sizes()["turn_samples"] == 24_000 - 4_800  # from 200 ms to the end of what is held
    journal.padded(24_000)  # the second of filler the server counted, learnt of with the next block
    journal.captured(np.full(4_800, 2, np.int16))
    journal.handle(ev.InputAudioBufferSpeechStarted(type="input_audio_buffer.speech_started", audio_start_ms=2000,
                                                    item_id="u2"))
    assert np.array_equal(journal.resume(push_to_talk=False), np.full(4_800, 2, np.int16))


def test_filler_takes_no_memory_of_its_own() -> None:
    import tracemalloc

    journal = InputJournal(keep_s=30.0)
    tracemalloc.start()
    try:
        for _ in range(100):
            journal.padded(30 * 24_000)
        current, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < 200_000  # 100 stalls of 30 s each: not 100 blocks of 1.4 MB
