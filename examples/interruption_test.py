"""An interruption test with recorded audio, written the way an application's own test suite would.

Run it from the repository root::

    python3 -m pytest examples/interruption_test.py -q

``examples/audio/barge_in.wav`` is the microphone: a question at 0.5 s, then "stop, wait a
second" at 6.0 s, spoken over the assistant's reply. The ``voxline_replay`` fixture, from the
pytest plugin installed with voxline, plays it through a ``VoiceSession`` against the built-in
local server on a virtual clock (faster than real time, same cut points) and returns what the
listener heard, sample-aligned with the recording, the session events, and every wire frame
sent, so the test sees exactly what went out. ``check`` takes the expectations a farm
manifest takes and fails with the ones that do not hold.

The promise under test: the conversation is cut where the listener was. The one
``conversation.item.truncate`` sent must carry the ``audio_end_ms`` the ``BargeIn`` event
reports as heard, and the heard audio must be the reply, sample for sample, up to that point
and silence after it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxline.audio.synth import synthesize
from voxline.realtime.server import load_scenario
from voxline.realtime.server.engine.scenario import Say
from voxline.session.events import AssistantAudioStarted
from voxline.session.replay.check import ReplayRun, ReplayRunner

RECORDING = Path(__file__).parent / "audio" / "barge_in.wav"
RATE = 24_000
DEFAULT = load_scenario("default")  # the built-in server's replies: a greeting, then scripted answers


@pytest.fixture(scope="module")
def replay(voxline_replay: ReplayRunner) -> ReplayRun:
    return voxline_replay(RECORDING, scenario=DEFAULT, voice="tone", tail_s=2.0)


def test_one_barge_in_cut_where_the_listener_was(replay: ReplayRun) -> None:
    replay.check(barge_ins=1, max_cut_error_ms=1, no_errors=True)


def test_exactly_one_truncate_at_what_the_listener_heard(replay: ReplayRun) -> None:
    truncates = replay.sent_of("conversation.item.truncate")
    assert len(truncates) == 1
    (barge_in,) = replay.result.barge_ins
    assert truncates[0]["item_id"] == barge_in.item_id
    assert truncates[0]["audio_end_ms"] == barge_in.audio_end_ms
    assert abs(barge_in.heard_ms - truncates[0]["audio_end_ms"]) < 1.0


def test_the_heard_audio_is_the_reply_up_to_the_cut_then_silence(replay: ReplayRun) -> None:
    result = replay.result
    (barge_in,) = result.barge_ins
    started = next(e for e in result.events if isinstance(e, AssistantAudioStarted) and e.item_id == barge_in.item_id)
    start, cut = round(started.at * RATE), round((barge_in.at + barge_in.reaction_s) * RATE)
    fade = round(barge_in.reaction_s * RATE)
    # what the listener heard is the reply, sample for sample, from its first sample to the cut...
    said = DEFAULT.turns[0].outputs[0]
    assert isinstance(said, Say)  # the first turn's reply is spoken, not a tool call
    reply, heard = synthesize(said.text, "tone"), replay.heard
    assert np.array_equal(heard[start : cut - fade], reply[: cut - fade - start])
    # ...which is exactly as long as the truncate says
    assert (cut - start) * 1000 / RATE == pytest.approx(barge_in.audio_end_ms, abs=1.0)
    # and after the cut there is silence until the next reply starts (the sample at the fade's
    # end is the last one heard: it keeps a little sound)
    following = [e.at for e in result.events if isinstance(e, AssistantAudioStarted) and e.at > barge_in.at]
    end = round(following[0] * RATE) if following else len(heard)
    assert cut < end and not np.any(heard[cut + 1 : end])
