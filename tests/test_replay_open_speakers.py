"""Open speakers in lockstep replay: the room's echo reaches the microphone, the canceller removes it.

The echo is what the listener heard, mixed back through a room (delay plus decaying tail) at
-6 dB. Without cancellation the local server's VAD takes the assistant for the user and it
interrupts itself; with AEC3 it must not, while a real "stop" over the echo is still caught
and cut within 10 ms of what was heard.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voxline.audio.room import RoomEcho
from voxline.audio.synth import synthesize
from voxline.session.events import BargeIn, FalseBargeIn, PlaybackHeld
from voxline.session.local_barge import BargePolicy
from voxline.session.settings import SessionSettings
from tests.support.heard import heard_length
from tests.support.oracle import sent
from tests.support.replays import LONG, LONG_TEXT, check_cut, replay, speech  # noqa: F401 (fixture)

STOP_AT = 5.0


def late_server(threshold: float = 0.8) -> SessionSettings:
    """A server VAD that needs a louder voice, so the local VAD hears speech first (as over a network)."""
    return SessionSettings(url="ws://local", api_key="local", turn_detection="server_vad", vad_threshold=threshold)


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_without_cancellation_the_assistant_interrupts_itself(speech: dict[str, np.ndarray], delay_ms: int) -> None:
    result, _rec = replay([(0.5, speech["question"])], 9.0, echo=RoomEcho(delay_ms, -6.0))
    assert len(result.barge_ins) >= 3  # the baseline: it keeps hearing itself


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_with_aec3_it_never_interrupts_itself(speech: dict[str, np.ndarray], delay_ms: int) -> None:
    result, _rec = replay([(0.5, speech["question"])], 9.0, echo=RoomEcho(delay_ms, -6.0), aec="webrtc")
    assert result.barge_ins == []


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_a_real_interruption_over_the_echo_is_cut_where_it_was_heard(speech: dict[str, np.ndarray],
                                                                      delay_ms: int) -> None:
    result, rec = replay([(0.5, speech["question"]), (STOP_AT, speech["stop"])], 9.0,
                         echo=RoomEcho(delay_ms, -6.0), aec="webrtc")
    (barge,) = result.barge_ins
    assert STOP_AT < barge.at < STOP_AT + 0.3
    check_cut(result, rec, LONG_TEXT)


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_local_vad_holds_before_the_server_and_the_cut_is_the_held_point(speech: dict[str, np.ndarray],
                                                                          delay_ms: int) -> None:
    result, rec = replay([(0.5, speech["question"]), (STOP_AT, speech["stop"])], 9.0, settings=late_server(),
                         echo=RoomEcho(delay_ms, -6.0), aec="webrtc", local_vad="webrtc")
    (held,) = [e for e in result.events if isinstance(e, PlaybackHeld)]
    (barge,) = result.barge_ins
    assert barge.trigger == "local_vad" and held.at <= barge.at
    # true onset to silence: the voice is heard over the echo before AEC3 lets it through (which
    # takes 100-170 ms), so the hold does not wait for the canceller's output
    assert held.at - STOP_AT <= 0.15
    assert barge.audio_end_ms == int(held.heard_ms)
    check_cut(result, rec, LONG_TEXT)


@pytest.mark.parametrize("delay_ms", [30, 120])
def test_local_vad_never_holds_on_the_echo_alone(speech: dict[str, np.ndarray], delay_ms: int) -> None:
    result, _rec = replay([(0.5, speech["question"])], 9.0, settings=late_server(), echo=RoomEcho(delay_ms, -6.0),
                          aec="webrtc", local_vad="webrtc")
    assert [e for e in result.events if isinstance(e, PlaybackHeld)] == [] and result.barge_ins == []


def test_a_backchannel_the_server_never_confirms_resumes_the_reply(speech: dict[str, np.ndarray]) -> None:
    mhm = (speech["question"][:7200] * 0.5).astype(np.int16)  # 300 ms, quiet: below the server's threshold
    result, rec = replay([(0.5, speech["question"]), (STOP_AT, mhm)], 20.0, settings=late_server(),
                         echo=RoomEcho(60, -6.0), aec="webrtc", local_vad="webrtc",
                         barge_policy=BargePolicy(grace_s=0.6, resume=True), tail_s=15.0)
    (held,) = [e for e in result.events if isinstance(e, PlaybackHeld)]
    (false,) = [e for e in result.events if isinstance(e, FalseBargeIn)]
    assert false.resumed and false.held_at == held.at and false.at - held.at == pytest.approx(0.6, abs=0.021)
    assert result.barge_ins == [] and sent(rec, "conversation.item.truncate") == []
    _onset, heard = heard_length(result.heard, synthesize(LONG_TEXT, "espeak"))
    assert heard == len(synthesize(LONG_TEXT, "espeak"))  # all of it, on from the held point


def test_open_speaker_replays_are_deterministic(speech: dict[str, np.ndarray]) -> None:
    runs: list[Any] = []
    for _ in range(2):
        result, rec = replay([(0.5, speech["question"]), (STOP_AT, speech["stop"])], 7.0,
                             echo=RoomEcho(60, -6.0), aec="webrtc", local_vad="webrtc")
        marks = [(type(e).__name__, e.at, e.heard_ms) for e in result.events if isinstance(e, (BargeIn, PlaybackHeld))]
        runs.append((result.heard.tobytes(), marks, [e["audio_end_ms"] for e in sent(rec, "conversation.item.truncate")]))
    assert runs[0] == runs[1]


async def _late_mic(blocks: Any, clock: Any, origin: float, lag_s: float, timed: bool) -> Any:
    """Blocks handed over ``lag_s`` after their capture, as a device's input buffer does."""
    start = 0
    async for block in blocks:
        await clock.sleep_until(origin + (start + len(block)) / 24000 + lag_s)
        yield (start / 24000, block) if timed else block
        start += len(block)


def _session_with_late_mic(samples: np.ndarray, lag_s: float, timed: bool) -> int:
    """Self-interruptions of a VoiceSession whose microphone arrives ``lag_s`` late, with AEC3."""
    from voxline.audio.sinks import TimelineSink
    from voxline.base.clock import VirtualClock
    from voxline.session.capture import attach_ring
    from voxline.session.lockstep import run_lockstep
    from voxline.audio.clocked_output import ClockedOutput
    from voxline.audio.recording import Recording, echoed_blocks
    from voxline.session.replay import engine_connector
    from voxline.session.voice import VoiceSession

    clock = VirtualClock()

    async def main() -> int:
        origin = clock.now()
        output = ClockedOutput(clock, TimelineSink(), origin=origin)
        mic = echoed_blocks(Recording(samples, clock, origin), RoomEcho(30, -6.0), attach_ring(output.playout))
        session = VoiceSession(SessionSettings(api_key="local"), output=output, clock=clock, aec="webrtc",
                               input=_late_mic(mic, clock, origin, lag_s, timed),
                               connector=engine_connector(LONG, clock, voice="espeak"))
        cuts = 0
        async with session:
            while not (session.input_finished and session.idle) and clock.now() - origin < len(samples) / 24000 + 2:
                await clock.sleep(0.02)
                cuts += sum(isinstance(e, BargeIn) for e in session.pending_events())
        return cuts

    return run_lockstep(main(), clock)


def test_a_late_microphone_is_aligned_by_its_capture_times(speech: dict[str, np.ndarray]) -> None:
    from tests.support.speech import mix_timeline

    samples = mix_timeline(9.0, [(0.5, speech["question"])])
    # input handed over 600 ms after capture: timed by arrival, the reference is read 600 ms after the
    # echo, beyond what AEC3's own delay handling absorbs (it copes with 300 ms here)
    assert _session_with_late_mic(samples, 0.6, timed=False) > 0
    assert _session_with_late_mic(samples, 0.6, timed=True) == 0
