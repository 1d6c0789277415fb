"""The echo-path monitor and the gated canceller on plain arrays.

The far end is a speech-like signal played from 1 s; the microphone hears the user (another
speech-like signal) and, on open speakers, the room's echo of the far end. The monitor must
say "no echo path" soon after the far end starts when there is none, never while there is
one (even with the user talking over it), and the gated canceller must then hand the
microphone on untouched, and the canceller's output otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.ci import IN_CI

from voxline.audio.aec import AecUnavailable, GatedCanceller, WebRtcCanceller, make_canceller
from voxline.audio.echo_path import EchoPathMonitor
from voxline.audio.reference import PlayedRing
from voxline.audio.room import RoomEcho

RATE = 24_000
B = 480
FAR_AT = 1.0


def _speechlike(seconds: float, f0: float, vibrato_hz: float, syllable_hz: float, peak: int, seed: int) -> np.ndarray:
    """Deterministic harmonic noise at a syllable rate: speech-like enough for an echo path."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    pitch = f0 + 0.18 * f0 * np.sin(2 * np.pi * vibrato_hz * t)
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(pitch) / RATE) / k for k in range(1, 10))
    x = (voiced + 0.3 * rng.standard_normal(len(t))) * np.clip(np.sin(2 * np.pi * syllable_hz * t), 0, None) ** 0.5
    return (x / np.max(np.abs(x)) * peak).astype(np.int16)


def _far(seconds: float = 6.0) -> np.ndarray:
    far = np.zeros(int(seconds * RATE), np.int16)
    voice = _speechlike(seconds - FAR_AT, 140.0, 0.7, 3.5, 12000, seed=3)  # the assistant
    far[int(FAR_AT * RATE):] = voice[: len(far) - int(FAR_AT * RATE)]
    return far


def _user(length: int, at: float, seconds: float = 1.5) -> np.ndarray:
    near = np.zeros(length, np.int16)
    voice = _speechlike(seconds, 215.0, 0.45, 4.3, 9000, seed=11)  # another speaker than the far end's
    start = int(at * RATE)
    near[start : start + len(voice)] = voice[: length - start]
    return near


def _echo(far: np.ndarray, delay_ms: float, gain_db: float) -> np.ndarray:
    ring, room = PlayedRing(keep_s=4.0), RoomEcho(delay_ms, gain_db)
    out = np.zeros(len(far), np.float64)
    for s in range(0, len(far) - B + 1, B):
        ring.write(s / RATE, far[s : s + B])
        out[s : s + B] = room.echo(ring, s, B)
    return out


def _mix(*parts: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(sum(p.astype(np.float64) for p in parts)), -32768, 32767).astype(np.int16)


def _decisions(mic: np.ndarray, far: np.ndarray, monitor: EchoPathMonitor | None = None) -> list[bool | None]:
    monitor = monitor or EchoPathMonitor()
    return [monitor.feed(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic) - B + 1, B)]


def _first(decisions: list[bool | None], value: bool) -> float:
    return decisions.index(value) * B / RATE


def test_without_an_echo_path_it_says_none_within_a_second_of_the_far_end_even_over_the_user() -> None:
    far = _far()
    noise = (np.random.default_rng(5).standard_normal(len(far)) * 33).astype(np.int16)  # -60 dBFS floor
    for mic in (_user(len(far), 0.2, seconds=0.6), _mix(_user(len(far), 3.0), noise)):
        got = _decisions(mic, far)
        assert True not in got
        assert got[int(FAR_AT * RATE) // B] is None  # nothing is known before the far end plays
        assert FAR_AT < _first(got, False) <= FAR_AT + 1.0
        assert got[-1] is False  # the user talking over the far end later does not change it


@pytest.mark.parametrize("delay_ms", [30, 60, 90, 120])
def test_an_echo_at_minus_6_db_is_found_and_never_taken_for_none_even_in_double_talk(delay_ms: int) -> None:
    far = _far()
    mic = _mix(_echo(far, delay_ms, -6.0), _user(len(far), 2.0), _user(len(far), 4.0))
    monitor = EchoPathMonitor()
    got = _decisions(mic, far, monitor)
    assert False not in got
    assert _first(got, True) <= FAR_AT + 1.0
    assert monitor.delay_ms == pytest.approx(delay_ms, abs=1.0)
    assert monitor.gain_db == pytest.approx(-6.0, abs=1.5)


@pytest.mark.parametrize(("gain_db", "echo"), [(-20.0, True), (-28.0, True), (-45.0, False), (-60.0, False)])
def test_the_decision_follows_the_gain_of_the_path(gain_db: float, echo: bool) -> None:
    far = _far()
    got = _decisions(_mix(_echo(far, 60, gain_db), _user(len(far), 4.0)), far)
    assert got[-1] is echo
    assert (not echo) not in got  # no flapping on the way


def test_an_echo_that_appears_later_is_found_within_half_a_second() -> None:
    """A headset unplugged: no echo path first, then the speaker's."""
    far = _far(8.0)
    echo = _echo(far, 60, -6.0)
    echo[: 5 * RATE] = 0
    got = _decisions(_mix(echo, _user(len(far), 1.2)), far)
    assert got[5 * RATE // B - 1] is False
    assert 5.0 < _first(got, True) <= 5.5


def test_mismatched_blocks_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        EchoPathMonitor().feed(np.zeros(480, np.int16), np.zeros(240, np.int16))
    with pytest.raises(ValueError, match="EchoPathMonitor needs"):
        EchoPathMonitor(hop_ms=0)


def _webrtc() -> WebRtcCanceller:
    try:
        return WebRtcCanceller()
    except AecUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))


def test_the_gated_canceller_hands_on_the_microphone_untouched_where_there_is_no_echo() -> None:
    far = _far()
    mic = _user(len(far), 3.0)
    gated, bare = GatedCanceller(_webrtc()), _webrtc()
    out = np.concatenate([gated.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic), B)])
    plain = np.concatenate([bare.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic), B)])
    decided = int(np.ceil((FAR_AT + 1.0) * RATE / B)) * B
    assert gated.echo_path is False and gated.switches == 1
    assert np.array_equal(out[decided:], mic[decided:])  # the user's voice as it was captured
    user = slice(3 * RATE, int(3.15 * RATE))  # the bare canceller suppresses the start of it
    assert np.sum(plain[user].astype(np.float64) ** 2) < 0.5 * np.sum(mic[user].astype(np.float64) ** 2)


def test_with_an_echo_the_gated_canceller_is_the_canceller() -> None:
    far = _far()
    mic = _mix(_echo(far, 60, -6.0), _user(len(far), 3.0))
    gated, bare = GatedCanceller(_webrtc()), _webrtc()
    out = np.concatenate([gated.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic), B)])
    plain = np.concatenate([bare.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic), B)])
    assert gated.echo_path is True and gated.switches == 0
    assert np.array_equal(out, plain)


def test_make_canceller_gates_unless_asked_not_to() -> None:
    _webrtc()
    assert isinstance(make_canceller("webrtc"), GatedCanceller)
    assert isinstance(make_canceller("webrtc", gated=False), WebRtcCanceller)
