"""audio/synth.py: espeak-ng and the synthetic ``tone`` voice."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.vad import EnergyVad, SpeechStart, SpeechStop
from voxline.audio.synth import SAMPLE_RATE, VoiceUnavailableError, available_voices, synthesize
from tests.support.ci import require_tool

SENTENCE = "Hello! This is a test of the voice."
ROOT = Path(__file__).resolve().parent.parent


def speech_bounds(samples: np.ndarray) -> list[SpeechStart | SpeechStop]:
    padded = np.concatenate([np.zeros(SAMPLE_RATE, np.int16), samples, np.zeros(SAMPLE_RATE, np.int16)])
    return EnergyVad(silence_duration_ms=500).process(padded)


def test_tone_is_deterministic_int16_and_read_only() -> None:
    a = synthesize(SENTENCE, "tone")
    assert a.dtype == np.int16 and a.ndim == 1
    assert not a.flags.writeable
    b = synthesize(SENTENCE + " ", "tone")  # another cache entry, same words
    assert np.array_equal(a, b)


def test_tone_length_grows_with_the_text() -> None:
    short = synthesize("Hi there.", "tone")
    long = synthesize("Hi there. " * 6, "tone")
    assert 0.5 < len(short) / SAMPLE_RATE < 1.5
    assert len(long) > 5 * len(short)


def test_tone_pauses_at_punctuation() -> None:
    samples = synthesize("One, two.", "tone")
    frames = np.abs(samples[: len(samples) - len(samples) % 240].reshape(-1, 240)).max(axis=1)
    silent_runs = np.diff(np.flatnonzero(np.concatenate([[1], frames, [1]]) != 0)) - 1
    assert silent_runs.max() * 10 >= 140  # the comma's 150 ms pause


def test_tone_is_speech_for_an_energy_vad() -> None:
    events = speech_bounds(synthesize(SENTENCE, "tone"))
    assert [type(e) for e in events] == [SpeechStart, SpeechStop]


def test_empty_text_is_empty_audio() -> None:
    assert synthesize("", "tone").size == 0


def test_unknown_voice_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown voice"):
        synthesize("x", "robot")


def test_espeak_missing_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert available_voices() == ("tone",)
    with pytest.raises(VoiceUnavailableError):
        synthesize("x", "espeak")


def test_espeak_speaks_at_24k_deterministically() -> None:
    require_tool("espeak-ng")
    assert available_voices() == ("espeak", "tone")
    a = synthesize(SENTENCE, "espeak")
    assert a.dtype == np.int16
    assert 1.5 < len(a) / SAMPLE_RATE < 4.5
    assert [type(e) for e in speech_bounds(a)] == [SpeechStart, SpeechStop]
    other = synthesize(SENTENCE, "espeak:en-gb")
    assert not np.array_equal(a[: len(other)], other[: len(a)])


def test_espeak_output_is_identical_across_processes() -> None:
    require_tool("espeak-ng")
    code = (
        "import hashlib; from voxline.audio.synth import synthesize; "
        "print(hashlib.sha256(synthesize(%r).tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code % SENTENCE], check=True, capture_output=True, text=True, cwd=ROOT
        ).stdout
        for _ in range(2)
    }
    assert len(digests) == 1
    assert digests.pop().strip() == hashlib.sha256(synthesize(SENTENCE, "espeak").tobytes()).hexdigest()


def test_espeak_reads_text_not_options() -> None:
    require_tool("espeak-ng")
    samples = synthesize("--version", "espeak")
    assert samples.size > SAMPLE_RATE // 4
