"""audio/vad.py: the streaming energy VAD, in buffer time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.audio.vad import EnergyVad, SpeechStart, SpeechStop, threshold_to_dbfs

RATE = 24000


def tone(seconds: float, dbfs: float, freq: float = 220.0) -> np.ndarray:
    """A sine whose RMS is ``dbfs``."""
    t = np.arange(int(round(seconds * RATE))) / RATE
    amplitude = 32768.0 * 10 ** (dbfs / 20.0) * np.sqrt(2.0)
    return np.round(amplitude * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * RATE)), dtype=np.int16)


def run(vad: EnergyVad, signal: np.ndarray, block: int = 480) -> list[object]:
    events: list[object] = []
    for i in range(0, len(signal), block):
        events.extend(vad.process(signal[i : i + block]))
    return events


def test_threshold_maps_linearly_to_dbfs() -> None:
    assert threshold_to_dbfs(0.0) == -70.0
    assert threshold_to_dbfs(0.5) == -40.0
    assert threshold_to_dbfs(1.0) == -10.0
    assert threshold_to_dbfs(2.0) == -10.0  # clamped


def test_silence_gives_no_events() -> None:
    assert run(EnergyVad(), silence(3.0)) == []


def test_start_includes_prefix_padding_and_stop_includes_silence() -> None:
    signal = np.concatenate([silence(1.0), tone(1.0, -20.0), silence(1.0)])
    events = run(EnergyVad(prefix_padding_ms=300, silence_duration_ms=500), signal)
    assert events == [
        SpeechStart(onset=24000, start=24000 - 7200),
        SpeechStop(end=48000 + 12000, last_voiced=48000),
    ]


def test_start_is_clamped_at_zero() -> None:
    signal = np.concatenate([silence(0.1), tone(0.5, -20.0), silence(1.0)])
    start = run(EnergyVad(prefix_padding_ms=300), signal)[0]
    assert start == SpeechStart(onset=2400, start=0)


def test_click_shorter_than_min_speech_is_ignored() -> None:
    signal = np.concatenate([silence(0.5), tone(0.02, -10.0), silence(1.0)])
    assert run(EnergyVad(min_speech_ms=30), signal) == []


def test_short_pause_does_not_end_the_turn_but_a_long_one_does() -> None:
    short = np.concatenate([tone(0.5, -20.0), silence(0.3), tone(0.5, -20.0), silence(1.0)])
    assert [type(e) for e in run(EnergyVad(silence_duration_ms=500), short)] == [SpeechStart, SpeechStop]
    long = np.concatenate([tone(0.5, -20.0), silence(0.7), tone(0.5, -20.0), silence(1.0)])
    assert [type(e) for e in run(EnergyVad(silence_duration_ms=500), long)] == [SpeechStart, SpeechStop] * 2


def test_threshold_decides_what_is_loud_enough() -> None:
    quiet = np.concatenate([silence(0.5), tone(1.0, -45.0), silence(1.0)])
    assert run(EnergyVad(threshold=0.5), quiet) == []  # -45 dBFS < -40 dBFS
    assert len(run(EnergyVad(threshold=0.3), quiet)) == 2  # onset at -52 dBFS


def test_hysteresis_keeps_a_fading_word_voiced() -> None:
    fading = np.concatenate([tone(0.5, -30.0), tone(0.8, -43.0), silence(1.0)])
    events = run(EnergyVad(threshold=0.5, silence_duration_ms=500, hysteresis_db=6.0), fading)
    stop = events[-1]
    assert isinstance(stop, SpeechStop) and stop.last_voiced == int(1.3 * RATE)


def test_reset_forgets_speech_but_keeps_position() -> None:
    vad = EnergyVad()
    assert run(vad, np.concatenate([silence(0.5), tone(0.5, -20.0)]))[0] == SpeechStart(onset=12000, start=4800)
    assert vad.speaking
    vad.reset()
    assert not vad.speaking and vad.position == 24000
    assert run(vad, silence(2.0)) == []


def test_configure_changes_silence_duration() -> None:
    vad = EnergyVad(silence_duration_ms=500)
    vad.configure(threshold=0.5, prefix_padding_ms=0, silence_duration_ms=200)
    events = run(vad, np.concatenate([tone(0.5, -20.0), silence(1.0)]))
    assert events == [SpeechStart(onset=0, start=0), SpeechStop(end=12000 + 4800, last_voiced=12000)]


def test_other_sample_rates_count_their_own_samples() -> None:
    t = np.arange(8000) / 8000
    burst = np.round(3000 * np.sin(2 * np.pi * 200 * t)).astype(np.int16)
    signal = np.concatenate([np.zeros(4000, np.int16), burst, np.zeros(8000, np.int16)])
    vad = EnergyVad(sample_rate=8000, prefix_padding_ms=100, silence_duration_ms=500)
    assert vad.process(signal) == [SpeechStart(onset=4000, start=3200), SpeechStop(end=12000 + 4000, last_voiced=12000)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=60))
def test_events_do_not_depend_on_block_boundaries(sizes: list[int]) -> None:
    signal = np.concatenate([silence(0.37), tone(0.61, -25.0), silence(0.75), tone(0.3, -18.0), silence(0.9)])
    reference = EnergyVad().process(signal)
    vad, events, position = EnergyVad(), [], 0
    for size in sizes * (len(signal) // sum(sizes) + 1):
        if position >= len(signal):
            break
        events.extend(vad.process(signal[position : position + size]))
        position += size
    assert events == reference
    assert len(reference) == 4


def test_rejects_bad_geometry() -> None:
    with pytest.raises(ValueError):
        EnergyVad(sample_rate=0)


def reference_events(signal: np.ndarray, *, threshold: float, padding_ms: int, silence_ms: int,
                     min_speech_ms: int = 30, hysteresis_db: float = 6.0) -> list[object]:
    """The module docstring's rules, one 10 ms frame at a time, levels in dBFS (no streaming)."""
    frame = RATE // 100
    onset_db = threshold_to_dbfs(threshold)
    onset_frames = max(1, -(-min_speech_ms // 10))
    silence_frames = max(1, -(-silence_ms // 10))
    padding = padding_ms * RATE // 1000
    events: list[object] = []
    speaking, run_, quiet, loud_start, last_voiced = False, 0, 0, 0, 0
    for k in range(len(signal) // frame):
        chunk = signal[k * frame : (k + 1) * frame].astype(np.float64)
        level = 20 * np.log10(max(float(np.sqrt(np.mean(chunk * chunk))), 1e-9) / 32768.0)
        start, end = k * frame, (k + 1) * frame
        if not speaking:
            if level >= onset_db:
                loud_start = start if run_ == 0 else loud_start
                run_ += 1
                if run_ >= onset_frames:
                    speaking, quiet, last_voiced = True, 0, end
                    events.append(SpeechStart(onset=loud_start, start=max(0, loud_start - padding)))
            else:
                run_ = 0
        elif level >= onset_db - hysteresis_db:
            quiet, last_voiced = 0, end
        else:
            quiet += 1
            if quiet >= silence_frames:
                speaking, run_ = False, 0
                events.append(SpeechStop(end=end, last_voiced=last_voiced))
    return events


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.tuples(st.sampled_from([-80.0, -50.0, -43.0, -38.0, -20.0]), st.integers(1, 40)),
                    min_size=1, max_size=14),
    cuts=st.lists(st.integers(1, 12_000), min_size=1, max_size=8),  # up to 50 frames a block
    threshold=st.sampled_from([0.3, 0.5, 0.6]),
    silence_ms=st.sampled_from([10, 50, 200, 500]),
    min_speech_ms=st.sampled_from([10, 30, 60]),
)
def test_streaming_detector_matches_the_frame_by_frame_rules(
    pieces: list[tuple[float, int]], cuts: list[int], threshold: float, silence_ms: int, min_speech_ms: int
) -> None:
    # Stretches of a tone at a few levels around the thresholds, each a whole number of 10 ms or not.
    signal = np.concatenate([tone(n * 0.0075, db) if db > -80 else silence(n * 0.0075) for db, n in pieces])
    vad = EnergyVad(threshold=threshold, prefix_padding_ms=300, silence_duration_ms=silence_ms,
                    min_speech_ms=min_speech_ms)
    events: list[object] = []
    position, turn = 0, 0
    while position < len(signal):  # blocks of varied sizes, as appends come
        size = cuts[turn % len(cuts)]
        events.extend(vad.process(signal[position : position + size]))
        position, turn = position + size, turn + 1
    assert events == reference_events(signal, threshold=threshold, padding_ms=300, silence_ms=silence_ms,
                                      min_speech_ms=min_speech_ms)


def test_one_long_block_gives_the_same_events_as_20_ms_blocks() -> None:
    signal = np.concatenate([silence(0.5), tone(1.0, -20.0), silence(0.7), tone(0.05, -20.0), silence(1.0)] * 30)
    assert run(EnergyVad(), signal, block=len(signal)) == run(EnergyVad(), signal) != []


@pytest.mark.parametrize("frames_per_block", [1, 4, 40])
def test_a_shorter_silence_set_mid_pause_ends_the_turn_at_the_next_quiet_frame(frames_per_block: int) -> None:
    frame = RATE // 100
    loud, quiet = tone(0.05, -20.0), silence(0.1)  # five loud frames, then ten quiet ones
    vad = EnergyVad(silence_duration_ms=200, min_speech_ms=10)
    events = vad.process(loud) + vad.process(quiet)  # still speaking: the silence needs twenty frames
    vad.configure(threshold=0.5, prefix_padding_ms=300, silence_duration_ms=30)  # three now, ten already passed
    rest = np.concatenate([silence(0.02), tone(0.05, -20.0), silence(0.33)])
    block = frames_per_block * frame
    for k in range(0, len(rest), block):
        events += vad.process(rest[k: k + block])
    # once: a long block was walked back to a stop before the audio it had, and lost the next turn
    assert events == [SpeechStart(onset=0, start=0), SpeechStop(end=16 * frame, last_voiced=5 * frame),
                      SpeechStart(onset=17 * frame, start=0),  # the padding reaches back past 0
                      SpeechStop(end=25 * frame, last_voiced=22 * frame)]
