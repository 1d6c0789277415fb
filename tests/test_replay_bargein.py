"""Barge-in end to end in lockstep replay, with deterministic speech fixtures.

For each interruption the ``audio_end_ms`` sent on the wire must equal, within 10 ms, the
length of that item's audio found in the heard timeline by analysing the samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxline.audio.synth import synthesize
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.events import AssistantAudioStarted, SpeechStarted
from tests.support.oracle import sent
from tests.support.replays import LONG, LONG_TEXT, check_cut, replay, speech  # noqa: F401 (fixture)
from tests.support.speech import RATE

HERE = Path(__file__).parent
TWO = load_scenario(str(HERE / "scenarios" / "two_items.toml"))


def reply_timing(speech: dict[str, np.ndarray], scenario: Any = LONG) -> tuple[float, float]:
    """(time the first reply sample is heard, VAD detection delay) from an uninterrupted run."""
    result, _ = replay([(0.5, speech["question"])], 5.0, scenario)
    first = next(e for e in result.events if isinstance(e, AssistantAudioStarted))
    detected = next(e for e in result.events if isinstance(e, SpeechStarted))
    return first.at, detected.at - 0.5


def interrupt_at(speech: dict[str, np.ndarray], when: float, total: float, scenario: Any = LONG, **kw: Any):
    """Replay the question, then 'stop' timed so the server detects it at ``when``."""
    _first, delay = reply_timing(speech, scenario)
    return replay([(0.5, speech["question"]), (when - delay, speech["stop"])], total, scenario, **kw)


def test_interrupt_mid_reply(speech: dict[str, np.ndarray]) -> None:
    first, _ = reply_timing(speech)
    result, rec = interrupt_at(speech, first + 2.0, first + 5.0)
    ms = check_cut(result, rec, LONG_TEXT)
    assert 1970 <= ms <= 2030  # placed to within the 40 ms the microphone's chunks arrive in
    assert sent(rec, "response.cancel") == []  # server VAD cancels the response itself


def test_interrupt_in_first_100_ms_of_reply(speech: dict[str, np.ndarray]) -> None:
    first, _ = reply_timing(speech)
    result, rec = interrupt_at(speech, first + 0.05, first + 3.0)
    ms = check_cut(result, rec, LONG_TEXT)
    assert ms <= 100


def test_interrupt_just_after_the_first_of_two_items(speech: dict[str, np.ndarray]) -> None:
    first, _ = reply_timing(speech, TWO)
    preamble, answer = (o.text for o in TWO.turns[0].outputs)
    boundary = first + len(synthesize(preamble, "espeak")) / RATE
    result, rec = interrupt_at(speech, boundary + 0.3, boundary + 3.0, TWO)
    ms = check_cut(result, rec, answer)
    assert 250 <= ms <= 350
    assert sent(rec, "conversation.item.delete") == []  # the preamble was heard whole: nothing to cut there


def test_interrupt_before_the_second_item_deletes_it(speech: dict[str, np.ndarray]) -> None:
    first, _ = reply_timing(speech, TWO)
    preamble, _answer = (o.text for o in TWO.turns[0].outputs)
    boundary = first + len(synthesize(preamble, "espeak")) / RATE
    result, rec = interrupt_at(speech, boundary - 0.5, boundary + 3.0, TWO)
    check_cut(result, rec, preamble)
    (barge,) = result.barge_ins
    (delete,) = sent(rec, "conversation.item.delete")
    assert delete["item_id"] in barge.deleted and delete["item_id"] != barge.item_id


def test_speech_after_the_reply_has_ended_cuts_nothing(speech: dict[str, np.ndarray]) -> None:
    first, _ = reply_timing(speech, TWO)
    both = sum(len(synthesize(o.text, "espeak")) for o in TWO.turns[0].outputs) / RATE
    result, rec = interrupt_at(speech, first + both + 1.0, first + both + 3.0, TWO)
    assert result.barge_ins == []
    for kind in ("conversation.item.truncate", "conversation.item.delete", "response.cancel"):
        assert sent(rec, kind) == []


def test_interrupt_while_playback_is_starved(speech: dict[str, np.ndarray]) -> None:
    # the server streams at half real time: playout keeps running dry
    first, _ = reply_timing(speech)
    result, rec = interrupt_at(speech, first + 3.0, first + 5.0, speed=0.5)
    assert result.underrun_events > 0
    ms = check_cut(result, rec, LONG_TEXT)
    assert ms < 2000  # well under the 3 s of wall time: the gaps were not counted


@pytest.mark.parametrize("latency", [0.04, 0.1])
def test_audio_still_inside_the_device_is_not_counted_as_heard(speech: dict[str, np.ndarray], latency: float) -> None:
    first, _ = reply_timing(speech)
    result, rec = interrupt_at(speech, first + 2.0, first + 5.0, device_latency_s=latency)
    ms = check_cut(result, rec, LONG_TEXT)
    # the listener hears the reply `latency` later than it was handed over
    assert abs(ms - (2000 - latency * 1000)) <= 25
