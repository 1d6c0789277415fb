"""The open-speaker DSP pieces on plain arrays: reference ring, room echo, cancellers, local VAD, hold."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.ci import IN_CI

from voxline.audio.aec import AecUnavailable, SpeexCanceller, WebRtcCanceller, erle_db, make_canceller
from voxline.audio.local_vad import LocalVad, VadUnavailable
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.reference import PlayedRing
from voxline.audio.room import RoomEcho, parse_echo
from voxline.session.local_barge import TABLE, Action, BargePolicy, Hold, LocalBarge, LocalInput
from tests.support.speech import make_utterance

RATE = 24_000
B = 480


def speechlike(seconds: float, seed: int = 1) -> np.ndarray:
    """Deterministic syllable-rate modulated harmonic noise: speech-like enough for an echo path."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / RATE) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * np.pi * 3.5 * t), 0, None) ** 0.5
    x = (voiced + 0.3 * rng.standard_normal(len(t))) * envelope
    return (x / np.max(np.abs(x)) * 12000).astype(np.int16)


# ---------------------------------------------------------------- reference ring
def test_the_ring_returns_what_was_written_at_its_listener_time_and_silence_elsewhere() -> None:
    ring = PlayedRing(keep_s=0.1)  # 2400 samples
    block = np.arange(1, B + 1, dtype=np.int16)
    ring.write(0.0, block)
    ring.write(2 * B / RATE, block)  # a gap of one block
    assert np.array_equal(ring.read(0, B), block)
    assert not ring.read(B, B).any()
    assert np.array_equal(ring.read(2 * B - 10, 20)[10:], block[:10])
    assert not ring.read(3 * B, B).any()  # not written yet
    for k in range(3, 12):  # wrap the ring several times
        ring.write(k * B / RATE, block + k)
    assert np.array_equal(ring.read(11 * B, B), block + 11)
    assert not ring.read(0, B).any()  # forgotten: older than keep_s


def test_revoked_samples_read_as_silence() -> None:
    ring = PlayedRing()
    ring.write(0.0, np.full(B, 7, np.int16))
    ring.revoke_after(100 / RATE)
    got = ring.read(0, B)
    assert got[:101].tolist() == [7] * 101 and not got[101:].any()


# ---------------------------------------------------------------- room echo
def test_the_room_echo_is_causal_delayed_and_scaled() -> None:
    room = RoomEcho(50, -6.0)
    ring = PlayedRing()
    x = np.zeros(RATE, np.int16)
    x[1000] = 10000
    ring.write(0.0, x)
    y = room.echo(ring, 0, RATE)
    delay = 50 * RATE // 1000
    assert np.abs(y[: 1000 + delay]).max() < 1e-6  # nothing before the direct path
    assert y[1000 + delay] == pytest.approx(10000 * 10 ** (-6 / 20), rel=1e-6)
    assert np.abs(y[1000 + delay + 30 :]).max() > 1  # a reverberant tail follows
    # block by block equals all at once, and only older samples matter
    parts = np.concatenate([room.echo(ring, s, B) for s in range(0, RATE, B)])
    assert np.allclose(parts, y, atol=1e-6)
    assert np.array_equal(RoomEcho(50, -6.0).impulse, room.impulse)  # deterministic


@pytest.mark.parametrize("spec", ["60", "a,b", "0,-6", "60,-90", "1,2,3"])
def test_bad_echo_specs_are_one_line_errors(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_echo(spec)
    assert "\n" not in str(info.value) and "--echo" in str(info.value)


def test_echo_spec_parses() -> None:
    assert parse_echo("30,-6") == (30.0, -6.0)


# ---------------------------------------------------------------- echo cancellers
def echo_case(delay_ms: float, seconds: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    far = speechlike(seconds)
    ring, room = PlayedRing(), RoomEcho(delay_ms, -6.0)
    mic = np.zeros_like(far)
    for s in range(0, len(far), B):
        ring.write(s / RATE, far[s : s + B])
        mic[s : s + B] = np.clip(np.rint(room.echo(ring, s, B)), -32768, 32767)
    return mic, far


def run_aec(aec, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
    return np.concatenate([aec.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic), B)])


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_webrtc_aec3_removes_most_of_the_echo(delay_ms: float) -> None:
    mic, far = echo_case(delay_ms)
    out = run_aec(WebRtcCanceller(), mic, far)
    assert len(out) == len(mic)
    assert erle_db(mic[2 * RATE :], out[2 * RATE :]) >= 25.0


def test_speex_removes_echo_where_libspeexdsp_is_installed() -> None:
    try:
        aec = SpeexCanceller()
    except AecUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))
    mic, far = echo_case(60)
    assert erle_db(mic[3 * RATE :], run_aec(aec, mic, far)[3 * RATE :]) >= 10.0


def test_a_canceller_keeps_near_speech_when_nothing_plays() -> None:
    near = speechlike(2.0, seed=3)
    out = run_aec(WebRtcCanceller(), near, np.zeros_like(near))
    assert erle_db(near[RATE:], out[RATE:]) < 1.0  # ~no loss; the path lags by about 19 ms


def test_blocks_of_odd_sizes_come_back_at_their_own_length() -> None:
    aec = make_canceller("webrtc")
    for n in (100, 333, 480, 7):
        assert len(aec.process(np.zeros(n, np.int16), np.zeros(n, np.int16))) == n
    with pytest.raises(ValueError):
        aec.process(np.zeros(10, np.int16), np.zeros(11, np.int16))


def test_a_missing_or_unknown_canceller_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AecUnavailable, match="unknown echo canceller 'nope'"):
        make_canceller("nope")
    monkeypatch.setitem(sys.modules, "pywebrtc_audio", None)  # as if the extra were not installed
    with pytest.raises(AecUnavailable) as info:
        make_canceller("webrtc")
    assert "pip install 'voxline[aec]'" in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- local VAD
@pytest.mark.parametrize("backend", ["webrtc", "silero"])
def test_local_vad_finds_speech_onsets(backend: str, tmp_path: Path) -> None:
    speech = make_utterance("what is the weather like today", tmp_path).samples
    x = np.zeros(len(speech) + 2 * RATE, np.int16)
    x[RATE : RATE + len(speech)] = speech
    vad = LocalVad(backend)
    onsets = [o for s in range(0, len(x), B) for o in vad.process(x[s : s + B], None, s)]
    assert onsets and RATE - 0.035 * RATE <= onsets[0] <= RATE + 0.15 * RATE  # silero: 32 ms windows


def test_residual_echo_under_loud_playout_is_not_speech() -> None:
    far = speechlike(3.0)
    residual = (far.astype(np.float64) * 10 ** (-25 / 20)).astype(np.int16)  # 25 dB under the playout
    vad = LocalVad("webrtc")
    onsets = [o for s in range(0, len(far), B) for o in vad.process(residual[s : s + B], far[s : s + B], s)]
    assert onsets == [] and vad.gated > 0
    # the same signal with nothing playing is speech
    vad = LocalVad("webrtc", floor_dbfs=-60.0)
    assert [o for s in range(0, len(far), B) for o in vad.process(residual[s : s + B], None, s)]


def test_an_unknown_vad_is_one_clear_line() -> None:
    with pytest.raises(VadUnavailable, match="unknown local VAD"):
        LocalVad("nope")


# ---------------------------------------------------------------- playout hold
def test_a_held_playout_plays_silence_keeps_its_queue_and_resumes_at_the_heard_point() -> None:
    playout = PlayoutBuffer()
    ring = PlayedRing()
    playout.attach_reference(ring)
    playout.enqueue(np.arange(1, 2001, dtype=np.int16), "item_a")
    first = playout.read(B, 0.0)
    playout.hold()
    held = playout.read(B, B / RATE)
    assert not held.any() and playout.queued_samples == 2000 - B and playout.underrun_events == 0
    assert playout.heard_samples("item_a", 0, 10.0) == B
    playout.release()
    again = playout.read(B, 2 * B / RATE)
    assert again[0] == first[-1] + 1  # exactly where the listener stopped
    assert np.array_equal(ring.read(0, 3 * B), np.concatenate([first, held, again]))
    playout.hold()
    cut = playout.interrupt(3 * B / RATE + 0.01)  # the cut lands on the held point
    assert cut.heard_samples == 2 * B and not playout.held


# ---------------------------------------------------------------- the local-VAD table
def test_the_table_is_total_and_every_hold_ends() -> None:
    for state, event, resume in itertools.product(Hold, LocalInput, (False, True)):
        assert (state, event, resume) in TABLE
    for resume in (False, True):
        for event in (LocalInput.SERVER_SPEECH, LocalInput.GRACE_OVER, LocalInput.CUT):
            assert TABLE[(Hold.HELD, event, resume)][0] is Hold.IDLE


def test_a_hold_waits_for_the_grace_window() -> None:
    barge = LocalBarge(BargePolicy(grace_s=0.5, resume=True))
    assert barge.feed(LocalInput.LOCAL_ONSET, 1.0, onset=0.9) is Action.HOLD
    assert barge.held and not barge.due(1.49) and barge.due(1.5)
    assert barge.feed(LocalInput.GRACE_OVER, 1.5) is Action.RESUME and not barge.held
    barge = LocalBarge(BargePolicy(grace_s=0.5, resume=False))
    barge.feed(LocalInput.LOCAL_ONSET, 1.0)
    assert barge.feed(LocalInput.GRACE_OVER, 1.5) is Action.CUT_UNCONFIRMED
    with pytest.raises(ValueError):
        BargePolicy(grace_s=0)
