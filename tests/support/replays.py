"""Lockstep replays of spoken timelines (espeak-ng speech fixtures), and the cut a barge-in must make:
the ``audio_end_ms`` sent equals, within a tolerance, the item's audio found in the heard timeline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voxline.audio.synth import synthesize
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay import ReplayResult, replay_fast
from tests.support.heard import heard_length
from tests.support.oracle import WireRecorder, sent
from tests.support.speech import RATE, make_utterance, mix_timeline

__all__ = ["LONG", "LONG_TEXT", "check_cut", "replay", "speech"]

LONG = load_scenario("long")
LONG_TEXT = LONG.turns[0].outputs[0].text


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    cache = tmp_path_factory.mktemp("speech")
    return {
        "question": make_utterance("what is the weather like today", cache).samples,
        "stop": make_utterance("stop, wait a second", cache).samples,
    }


def replay(parts: list[tuple[float, np.ndarray]], total_s: float, scenario: Any = LONG, **kw: Any) -> tuple[ReplayResult, WireRecorder]:
    rec = WireRecorder()
    result = replay_fast(mix_timeline(total_s, parts), scenario=scenario, voice="espeak",
                          on_wire=rec, tail_s=kw.pop("tail_s", 2.0), **kw)
    rec.verify()
    return result, rec


def check_cut(result: ReplayResult, rec: WireRecorder, text: str, tolerance_ms: float = 10.0) -> int:
    (truncate,) = sent(rec, "conversation.item.truncate")
    onset, heard = heard_length(result.heard, synthesize(text, "espeak"))
    assert onset >= 0, "the item's audio must be in the heard timeline"
    assert abs(truncate["audio_end_ms"] - heard * 1000 / RATE) <= tolerance_ms
    (barge,) = result.barge_ins
    assert barge.audio_end_ms == truncate["audio_end_ms"]
    return truncate["audio_end_ms"]
