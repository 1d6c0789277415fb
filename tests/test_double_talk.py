"""The double-talk side of the local VAD: a voice over the echo, heard from its first frames.

Synthetic signals only: the far end is a voiced, syllabic harmonic signal; the echo is it
delayed and scaled, with a decaying tail; the near voice is another speaker (another pitch,
a fricative first) started over it.
"""

from __future__ import annotations

import numpy as np
import pytest

from voxline.audio.double_talk import HOP, EchoBound
from voxline.audio.local_vad import LocalVad

RATE = 24_000
BLOCK = 480


def voice(seconds: float, f0: float, seed: int, fricative_ms: float = 0.0) -> np.ndarray:
    """A speech-like signal: a gliding harmonic series, syllables at 4 Hz, optionally a hiss first."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    pitch = f0 * (1.0 + 0.15 * np.sin(2 * np.pi * 0.7 * t + seed))
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 30) if k * f0 < 5000)
    syllables = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t + seed) ** 2
    x = harmonics * syllables
    x = x / np.max(np.abs(x)) * 8000.0
    n = int(fricative_ms * RATE / 1000)
    if n:
        hiss = np.diff(rng.standard_normal(n + 1)) * 900.0  # high-passed noise: an "s"
        x = np.concatenate([hiss, x[: len(x) - n]])
    return x


def echo_of(far: np.ndarray, delay_ms: float, gain_db: float) -> np.ndarray:
    """The far end through a room: direct path after ``delay_ms``, then a tail 12 dB down decaying 60 dB in 200 ms."""
    rng = np.random.default_rng(3)
    n_tail = RATE // 5
    tail = rng.standard_normal(n_tail) * 10.0 ** (-3.0 * np.arange(n_tail) / n_tail)
    tail *= 10.0 ** (-12 / 20) / np.sqrt(np.sum(tail[: RATE // 100] ** 2))
    h = np.concatenate([[1.0], np.zeros(RATE // 1000), tail]) * 10.0 ** (gain_db / 20)
    d = int(delay_ms * RATE / 1000)
    return np.convolve(np.concatenate([np.zeros(d), far]), h)[: len(far)]


def i16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), -32768, 32767).astype(np.int16)


def near_flags(detector: EchoBound, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
    m, r = i16(mic), i16(far)
    flags: list[bool] = []
    for s in range(0, len(m) - BLOCK + 1, BLOCK):
        flags += detector.process(m[s : s + BLOCK], r[s : s + BLOCK])
    return np.array(flags)


FAR = voice(8.0, 120.0, seed=1)


@pytest.mark.parametrize("delay_ms", [30, 60, 90, 120])
@pytest.mark.parametrize("gain_db", [-12.0, -6.0, 0.0])
@pytest.mark.parametrize("known_delay", [False, True])
def test_the_echo_alone_is_never_near(delay_ms: int, gain_db: float, known_delay: bool) -> None:
    detector = EchoBound()
    detector.delay_ms = delay_ms if known_delay else None
    flags = near_flags(detector, echo_of(FAR, delay_ms, gain_db), FAR)
    assert not flags[10:].any()  # the first 100 ms: the echo has not begun, nothing plays in the mic


@pytest.mark.parametrize("delay_ms", [30, 60, 90, 120])
@pytest.mark.parametrize("at_s", [2.0, 3.37, 5.61])
def test_a_near_voice_over_the_echo_is_near_within_40_ms(delay_ms: int, at_s: float) -> None:
    near = voice(1.0, 210.0, seed=5, fricative_ms=80) * 10 ** (-6 / 20)  # as loud as the echo
    start = int(at_s * RATE)
    mic = echo_of(FAR, delay_ms, -6.0)
    mic[start : start + len(near)] += near
    detector = EchoBound()
    detector.delay_ms = delay_ms
    flags = near_flags(detector, mic, FAR)
    first = start // HOP
    assert not flags[10:first].any()
    assert flags[first : first + 4].any()  # its first frames, in the hiss before the voice


def test_an_echo_louder_than_assumed_is_learned_not_taken_for_a_voice() -> None:
    far = voice(4.0, 120.0, seed=2)
    detector = EchoBound(coupling_db=-20.0, relearn_ms=300)  # it assumed a quiet room; the echo comes at -3 dB
    flags = near_flags(detector, echo_of(far, 60, -3.0), far)
    assert flags[6:20].all()  # taken for a voice at first …
    assert not flags[6 + 30 + 5 :].any()  # … learned once near for longer than relearn_ms: never again
    assert float(np.median(detector.coupling_db)) > -10.0


def test_with_nothing_playing_nothing_is_near_and_once_it_plays_a_voice_above_it_is() -> None:
    silence = np.zeros(RATE)
    hum = voice(1.0, 150.0, seed=4) * 0.1
    assert not near_flags(EchoBound(), silence, silence).any()
    assert not near_flags(EchoBound(), hum, silence).any()  # no echo to tell it from: the VAD's business
    quiet_far = voice(1.0, 120.0, seed=6) * 0.01  # -40 dB under the voice, and nothing of it in the mic
    assert near_flags(EchoBound(), hum, quiet_far)[2:].all()


def test_blocks_of_any_length_give_one_decision_per_10_ms() -> None:
    detector = EchoBound()
    sizes = [7, 240, 333, 480, 1]
    got = sum(len(detector.process(np.zeros(n, np.int16), np.zeros(n, np.int16))) for n in sizes)
    assert got == sum(sizes) // HOP
    with pytest.raises(ValueError, match="one length"):
        detector.process(np.zeros(10, np.int16), np.zeros(11, np.int16))
    with pytest.raises(ValueError):
        EchoBound(min_bands=0)


def _onsets(vad: LocalVad, out: np.ndarray, raw: np.ndarray, far: np.ndarray) -> list[int]:
    o, m, r = i16(out), i16(raw), i16(far)
    found: list[int] = []
    for s in range(0, len(m) - BLOCK + 1, BLOCK):
        found += vad.process(o[s : s + BLOCK], r[s : s + BLOCK], s, raw=m[s : s + BLOCK])
    return found


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_local_vad_holds_on_the_raw_voice_while_the_canceller_still_hides_it(delay_ms: int) -> None:
    pytest.importorskip("webrtcvad")
    near = voice(1.0, 210.0, seed=5, fricative_ms=80) * 10 ** (-6 / 20)
    start = int(3.0 * RATE)
    raw = echo_of(FAR, delay_ms, -6.0)
    raw[start : start + len(near)] += near
    suppressed = np.zeros_like(raw)  # a canceller that lets nothing of the voice through yet
    onset, *_later = _onsets(LocalVad("webrtc"), suppressed, raw, FAR)  # later: its syllables after a pause
    assert 0 <= onset - start <= 40 * RATE // 1000
    assert _onsets(LocalVad("webrtc", double_talk=False), suppressed, raw, FAR) == []  # the canceller's output alone


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_local_vad_finds_no_onset_in_the_echo_alone(delay_ms: int) -> None:
    pytest.importorskip("webrtcvad")
    raw = echo_of(FAR, delay_ms, -6.0)
    residual = raw * 10 ** (-30 / 20)  # what a canceller leaves of it
    assert _onsets(LocalVad("webrtc"), residual, raw, FAR) == []
