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
