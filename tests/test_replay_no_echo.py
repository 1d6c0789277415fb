"""The canceller on where there is no echo (headphones): a barge-in is never later for it.

Lockstep replays with no echo in the microphone, each run with the canceller off and on: the
server must detect the interruption at the same listener time (within 20 ms), and the cut
must be the same. The bare AEC3 (ungated) suppresses the start of the user's voice while the
assistant plays, and is shown to be 120 ms or more late on the same recordings, so these
tests fail without the gate.
"""

from __future__ import annotations

import numpy as np
import pytest

from voxline.audio.aec import AecUnavailable, make_canceller
from voxline.audio.wavio import read_wav
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.events import BargeIn
from voxline.session.replay import ReplayResult, replay_fast
from tests.support.ci import IN_CI, require_tool
from tests.support.cli import EXAMPLE
from tests.support.replays import replay, speech

__all__ = ["speech"]  # the module's fixture, used by the tests below

TOLERANCE_S = 0.02
STOP_AT = 6.0  # where "stop, wait a second" begins in examples/audio/barge_in.wav


def _canceller(gated: bool = True) -> object:
    try:
        return make_canceller("webrtc", gated=gated)
    except AecUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))


def _barge(result: ReplayResult, after: float) -> BargeIn:
    (barge,) = [b for b in result.barge_ins if b.at >= after]
    return barge


@pytest.mark.parametrize("voice", ["tone", "espeak"])
def test_barge_in_wav_is_caught_as_early_with_the_canceller_as_without(voice: str) -> None:
    if voice == "espeak":
        require_tool("espeak-ng")
    samples, _rate = read_wav(EXAMPLE)
    scenario = load_scenario("default")
    runs = {name: replay_fast(samples, scenario=scenario, voice=voice, tail_s=2.0, aec=aec, local_vad=vad)
            for name, aec, vad in [("off", None, None), ("on", _canceller(), None),
                                   ("on + local VAD", _canceller(), "webrtc"), ("bare", _canceller(False), None)]}
    off = _barge(runs["off"], STOP_AT)
    for name in ("on", "on + local VAD"):
        on = _barge(runs[name], STOP_AT)
        assert on.at - off.at <= TOLERANCE_S, f"{name}: {on.at - off.at:.3f} s later"
        assert abs(on.audio_end_ms - off.audio_end_ms) <= 20  # type: ignore[operator]
    assert _barge(runs["bare"], STOP_AT).at - off.at >= 0.12  # what the gate prevents


@pytest.mark.parametrize("stop_at", [4.0, 7.0])
def test_a_stop_over_the_long_reply_is_caught_as_early_with_the_canceller_as_without(
        speech: dict[str, np.ndarray], stop_at: float) -> None:
    parts = [(0.5, speech["question"]), (stop_at, speech["stop"])]
    off, _rec = replay(parts, 10.0, tail_s=1.0)
    on, _rec = replay(parts, 10.0, tail_s=1.0, aec=_canceller())
    bare, _rec = replay(parts, 10.0, tail_s=1.0, aec=_canceller(False))
    assert _barge(on, stop_at).at - _barge(off, stop_at).at <= TOLERANCE_S
    assert _barge(on, stop_at).audio_end_ms == _barge(off, stop_at).audio_end_ms
    assert _barge(bare, stop_at).at - _barge(off, stop_at).at >= 0.12


def test_the_local_vad_holds_at_once_where_there_is_no_echo(speech: dict[str, np.ndarray]) -> None:
    """No echo path: the local VAD sees the microphone untouched and no echo gate: onset → hold ≤ 60 ms."""
    parts = [(0.5, speech["question"]), (4.0, speech["stop"])]
    result, _rec = replay(parts, 10.0, tail_s=1.0, aec=_canceller(), local_vad="webrtc")
    barge = _barge(result, 4.0)
    assert barge.trigger == "local_vad" and barge.at - 4.0 <= 0.06
