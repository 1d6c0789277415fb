"""The library's replay and audio entry points refuse a wrong argument at the call, in one line naming it.

Each of these used to be taken and then fail deep inside (a ZeroDivisionError as a fatal
session error at the end of a whole replay, ``'str' object has no attribute 'write'`` on the
first block), or was quietly taken to mean something else (channel -1, speed -1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording, WavFeed
from voxline.base.clock import VirtualClock
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay.check import replay_in_lockstep
from voxline.session.replay.driver import replay_fast

from tests.support.ci import ROOT

EXAMPLE = ROOT / "examples" / "audio" / "barge_in.wav"
SHORT = np.zeros(2400, np.int16)


@pytest.mark.parametrize(("given", "error", "message"), [
    ({"speed": 0}, ValueError, "speed takes a number > 0, not 0"),
    ({"speed": "4"}, TypeError, "speed takes a number, not str"),
    ({"tail_s": math.nan}, ValueError, "tail_s takes a finite number, not nan"),
    ({"device_latency_s": -1}, ValueError, "device_latency_s takes a number ≥ 0, not -1"),
    ({"settings": 5}, TypeError, "settings takes a SessionSettings, not int"),
    ({"voice": None}, TypeError, "voice takes a string, not NoneType"),
    ({"scenario": 5}, TypeError, "scenario takes a built-in name, a TOML path or a Scenario, not int"),
])
def test_a_lockstep_replay_refuses_a_bad_argument_before_it_runs(given: dict[str, Any], error: type[Exception],
                                                                 message: str) -> None:
    with pytest.raises(error) as refused:
        replay_in_lockstep(SHORT, **given)
    assert str(refused.value) == message


@pytest.mark.parametrize(("recording", "message"), [
    (5, "recording takes a WAV path or an int16 array, not int"),
    (np.zeros(10, np.float32), "a recording takes int16 mono samples (a 1-D int16 array), not a float32 array of "
                               "shape (10,)"),
    (np.zeros((10, 2), np.int16), "a recording takes int16 mono samples (a 1-D int16 array), not a int16 array of "
                                  "shape (10, 2)"),
])
def test_a_recording_that_is_no_mono_audio_is_named(recording: Any, message: str) -> None:
    with pytest.raises(TypeError) as refused:
        replay_in_lockstep(recording)
    assert str(refused.value) == message


def test_replay_fast_takes_a_loaded_scenario_and_says_where_names_go() -> None:
    with pytest.raises(TypeError, match=r"scenario takes a Scenario \(load_scenario\(name\); replay_in_lockstep"):
        replay_fast(SHORT, scenario="default")  # type: ignore[arg-type]
    assert replay_fast(SHORT, scenario=load_scenario("default"), voice="tone", tail_s=0.5).duration_s > 0


@pytest.mark.parametrize(("given", "error", "message"), [
    ({"clock": None}, TypeError, "clock takes a Clock (RealClock, VirtualClock), not NoneType"),
    ({"sink": "out.wav"}, TypeError, "sink takes a Sink (WavSink, NullSink), not str"),
    ({"playout": 5}, TypeError, "playout takes a PlayoutBuffer, not int"),
    ({"block": 0}, ValueError, "block (samples per block) takes a whole number ≥ 1, not 0"),
    ({"latency_s": math.nan}, ValueError, "latency_s takes a finite number, not nan"),
    ({"origin": "0"}, TypeError, "origin takes a number, not str"),
])
def test_a_clocked_output_refuses_what_would_fail_on_its_first_block(given: dict[str, Any], error: type[Exception],
                                                                     message: str) -> None:
    clock = given.pop("clock", VirtualClock())
    with pytest.raises(error) as refused:
        ClockedOutput(clock, **given)
    assert str(refused.value) == message


def test_a_recording_of_a_path_says_to_open_it_as_a_feed() -> None:
    with pytest.raises(TypeError, match=r"not str$") as refused:
        Recording("talk.wav", VirtualClock(), 0.0)  # type: ignore[arg-type]
    assert "WavFeed(path)" in str(refused.value)


@pytest.mark.parametrize(("channel", "error", "message"), [
    (5, ValueError, "channel takes 0..0 for this 1-channel file, not 5"),
    (-1, ValueError, "channel takes a whole number ≥ 0, not -1"),
    ("left", TypeError, "channel takes a whole number, not str"),
])
def test_a_wav_feed_channel_must_be_one_the_file_has(channel: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as refused:
        WavFeed(EXAMPLE, channel=channel)
    assert str(refused.value) == message
