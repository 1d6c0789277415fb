"""The library's replay and audio entry points refuse a wrong argument at the call, in one line naming it.

Each of these used to be taken and then fail deep inside (a ZeroDivisionError as a fatal
session error at the end of a whole replay, ``'str' object has no attribute 'write'`` on the
first block), or was quietly taken to mean something else (channel -1, speed -1).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording, WavFeed
from voxline.audio.wavio import write_wav
from voxline.base.clock import RealClock, VirtualClock
from voxline.base.errors import AudioError
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay.check import replay_in_lockstep
from voxline.session.events import SpeechStarted
from voxline.session.lockstep import run_lockstep
from voxline.session.replay.driver import engine_connector, replay_fast
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

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


async def test_a_lockstep_replay_inside_a_running_loop_says_how_to_run_it_and_runs_from_a_thread() -> None:
    """The voxline_replay fixture in an async test failed with asyncio's 'Runner.run() cannot be called from a
    running event loop'."""
    import asyncio

    from voxline.realtime.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"runs a lockstep event loop of its own .* asyncio\.to_thread"):
        replay_in_lockstep(SHORT)
    run = await asyncio.to_thread(replay_in_lockstep, SHORT, tail_s=0.5)
    assert run.result.duration_s > 0


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


def test_a_recording_of_a_wav_file_is_a_session_input_as_written(tmp_path: Path) -> None:
    """``VoiceSession(settings, input=Recording("question.wav"))`` works as the README puts it: the file streamed,
    said from when the session first reads it, and let go of once read (before: a TypeError asking for a WavFeed,
    a clock and an origin)."""
    with pytest.raises(AudioError, match="talk.wav"):
        Recording(tmp_path / "talk.wav")
    with pytest.raises(TypeError, match="not int$"):
        Recording(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a WAV file's path, a 1-D int16 array or a sample feed, not bytes$"):
        Recording(bytes(EXAMPLE))  # type: ignore[arg-type]
    unread = Recording(str(EXAMPLE))
    assert isinstance(unread.clock, RealClock)  # a session's own clock when none is given
    unread.close()
    unread.close()
    assert unread.due is None and unread.take(1e9) == []  # closed: nothing more, and no read of a closed file
    empty = tmp_path / "empty.wav"
    write_wav(empty, np.zeros(0, np.int16))
    assert Recording(empty).due is None  # nothing to read: let go of at once
    clock = VirtualClock()

    async def session_run() -> tuple[float, list[Any], Recording]:
        await clock.sleep(5.0)  # made at 5 s, read from when the session opens
        recording = Recording(EXAMPLE, clock)
        opened = clock.now()
        events: list[Any] = []
        session = VoiceSession(SessionSettings(api_key="local"), output=ClockedOutput(clock, origin=0.0), clock=clock,
                               input=recording, connector=engine_connector(load_scenario("default"), clock,
                                                                            voice="tone"))
        async with session:
            while not (session.input_finished and session.idle):
                events += session.pending_events()
                await clock.sleep(0.02)
        return opened, events, recording

    opened, events, recording = run_lockstep(session_run(), clock)
    started = [e for e in events if isinstance(e, SpeechStarted)]
    assert len(started) == 2 and 0.5 < started[0].at - opened < 0.6  # the voice begins 0.50 s into the file
    assert recording.due is None and recording._file is not None and recording._file.reader._file.closed


def test_a_session_closed_before_its_recording_ends_lets_go_of_the_file() -> None:
    """A ``Recording(path)`` is read once, by the session it was given to: closing that session early closes the
    file, whoever holds the recording (before: open until the recording was collected)."""
    clock = VirtualClock()

    async def session_run() -> Recording:
        recording = Recording(EXAMPLE, clock)
        session = VoiceSession(SessionSettings(api_key="local"), output=ClockedOutput(clock, origin=0.0), clock=clock,
                               input=recording, connector=engine_connector(load_scenario("default"), clock,
                                                                            voice="tone"))
        async with session:
            await clock.sleep(1.0)  # a second of a recording of several
            assert not session.input_finished and recording.due is not None
        return recording

    recording = run_lockstep(session_run(), clock)
    assert recording.due is None and recording._file is not None and recording._file.reader._file.closed

    async def closed_at_once() -> Recording:  # before its input's task ever ran
        recording = Recording(EXAMPLE, clock)
        async with VoiceSession(SessionSettings(api_key="local"), output=ClockedOutput(clock, origin=0.0), clock=clock,
                                input=recording, connector=engine_connector(load_scenario("default"), clock,
                                                                            voice="tone")):
            pass
        return recording

    at_once = run_lockstep(closed_at_once(), clock)
    assert at_once.due is None and at_once._file is not None and at_once._file.reader._file.closed

    async def never_opened() -> Recording:
        recording = Recording(EXAMPLE, clock)
        session = VoiceSession(SessionSettings(api_key="local"), output=ClockedOutput(clock, origin=0.0), clock=clock,
                               input=recording, connector=engine_connector(load_scenario("default"), clock,
                                                                            voice="tone"))
        await session.aclose()  # a session that never read it: the recording is still the caller's to use
        return recording

    unread = run_lockstep(never_opened(), clock)
    assert unread.due is not None and unread._file is not None and not unread._file.reader._file.closed
    unread.close()


@pytest.mark.parametrize(("channel", "error", "message"), [
    (5, ValueError, "channel takes 0..0 for this 1-channel file, not 5"),
    (-1, ValueError, "channel takes a whole number ≥ 0, not -1"),
    ("left", TypeError, "channel takes a whole number, not str"),
])
def test_a_wav_feed_channel_must_be_one_the_file_has(channel: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as refused:
        WavFeed(EXAMPLE, channel=channel)
    assert str(refused.value) == message
