"""``replay --fast --api live``: a recording through the one driver, in lockstep with the local server's Live engine.

The engine's timeline runs on the recording's audio. A local-VAD onset over the stand-in's reply
cuts the playout; what the session then tells the model (``session.instructions.append``) must be
the timeline instant the listener reached, within one 20 ms block, and the frames on the wire must
be the ``openai`` package's Live events.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from pydantic import SecretStr

from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session import SessionSettings
from voxline.session.events import BargeIn, LiveDelivered, SessionError
from voxline.session.replay.driver import replay_fast
from tests.support.live_oracle import check_live_client_event, check_live_server_event

RATE = 24_000


def _voice(seconds: float, freq: float = 180.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (6000 * np.sin(2 * np.pi * freq * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.int16)


def test_a_live_replay_in_lockstep_tells_the_model_what_was_heard() -> None:
    gap = np.zeros(int(1.5 * RATE), np.int16)
    # speak, wait for the reply to play a while, speak over it, then silence for the session to settle: long enough
    # for the reply to that, whose track (the stand-in's timeline is the caller's audio) stops with the recording
    samples = np.concatenate([gap, _voice(1.0), np.zeros(int(2.5 * RATE), np.int16), _voice(0.8), *[gap] * 6])
    frames: list[tuple[str, dict]] = []

    def wire(direction: str, text: str) -> None:
        frames.append((direction, json.loads(text)))

    settings = SessionSettings(api="live", api_key=SecretStr("local"))
    result = replay_fast(samples, scenario=load_scenario("default"), settings=settings, voice="tone", on_wire=wire,
                         local_vad="webrtc")
    barges = [e for e in result.events if isinstance(e, BargeIn)]
    delivered = [e for e in result.events if isinstance(e, LiveDelivered)]
    assert len(barges) == 1 and len(delivered) == 1
    barge = barges[0]
    heard = result.heard
    assert heard is not None
    # the listener's timeline: silent from the cut's fade on, though the stand-in went on until it heard the user
    assert not heard[int(barge.at * RATE) + int(0.006 * RATE):int((barge.at + 0.3) * RATE)].any()
    told = [e for d, e in frames if d == "out" and e["type"] == "session.instructions.append"]
    assert len(told) == 1 and told[0]["content"] == delivered[0].content
    at_ms = float(re.search(r"at (\d+) ms on the session timeline", told[0]["content"]).group(1))
    # ground truth from the listener's own audio: the reply began at its first sample heard (its first word's
    # start_ms on the timeline, where the stand-in places words) and the listener heard it until the cut's fade
    # ended (a pause between words may come before the cut: the end is the fade's, not the last loud sample)
    first_word = next(e for d, e in frames if d == "in" and e["type"] == "session.output_transcript.delta")
    r0 = int(np.flatnonzero(heard[int(2.5 * RATE):])[0]) + int(2.5 * RATE)  # after the user's first turn
    assert not heard[int((barge.at + 0.0051) * RATE):int((barge.at + 0.3) * RATE)].any()
    assert result.underrun_events == 0  # no silence of the client's own inside the reply
    truth_ms = first_word["start_ms"] + ((barge.at + 0.005) * RATE - r0) * 1000 / RATE
    print(f"told {at_ms:.0f} ms, heard {truth_ms:.1f} ms")
    assert abs(truth_ms - at_ms) <= 20, (truth_ms, at_ms)  # what it told is what was heard, within one 20 ms block
    # the session's figures, as a Realtime session's: the cut's reaction, the turns as heard
    assert result.metrics is not None
    (record,) = result.metrics.barge_ins
    assert record.trigger == "local_vad" and record.reaction_ms == pytest.approx(5.0, abs=0.5)
    assert record.heard_text == delivered[0].heard_text and record.text_method == "live_timeline"
    assert [t.statuses for t in result.metrics.turns][:1] == [("cut",)]
    for direction, event in frames:
        if event.get("type") in ("session.input_audio.append", "session.output_audio.delta"):
            continue
        check_live_client_event(event) if direction == "out" else check_live_server_event(event)


@pytest.mark.slow
def test_a_farm_takes_the_live_api_and_a_bad_api_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from tests.support.cli import EXAMPLE, one_line_error, voxline

    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "a.wav")
    run = voxline("replay", str(folder), "--fast", "--api", "live", "--voice", "tone", "--out-dir", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in (tmp_path / "out" / "a" / "events.jsonl").read_text().splitlines()]
    sent = [e["event"]["type"] for e in events if e.get("dir") == "out"]
    assert sent[0] == "session.start" and "session.input_audio.append" in sent
    assert any(e["event"]["type"] == "session.output_transcript.delta" for e in events if e.get("dir") == "in")
    bad = voxline("replay", str(folder / "a.wav"), "--fast", "--api", "beta")
    assert bad.returncode == 2 and "--api" in one_line_error(bad)


def test_a_live_turn_line_says_where_the_voice_began_from_the_servers_transcript() -> None:
    from voxline.realtime.server.engine.scenario import with_transcripts

    gap = np.zeros(int(1.5 * RATE), np.int16)
    samples = np.concatenate([np.zeros(int(0.5 * RATE), np.int16), _voice(1.2), gap, gap])  # the voice at 0.50 s
    scenario = with_transcripts(load_scenario("default"), ("What is the weather like?",))
    settings = SessionSettings(api="live", api_key=SecretStr("local"))
    result = replay_fast(samples, scenario=scenario, settings=settings, voice="tone")
    said = [line for line in result.summary_lines() if "you: started speaking" in line]
    # the transcript comes once the words are over; the line places the voice where it began, as Realtime's does
    assert len(said) == 1 and re.search(r"\(your voice began at 0\.5\d s; the server's transcript of it came \d+ ms "
                                        r"later\)$", said[0]), said
    assert result.metrics is not None and len(result.metrics.speech) == 1
    assert (result.metrics.speech[0].item_id or "").startswith("live_user")  # the turn's own id, as its event has


def test_a_refused_session_start_is_a_fatal_error_mapped_to_the_start() -> None:
    """A session that never started hears nothing and sends nothing: the run must say it failed, not end quietly."""
    frames: list[tuple[str, dict]] = []

    def wire(direction: str, text: str) -> None:
        frames.append((direction, json.loads(text)))

    settings = SessionSettings(api="live", api_key=SecretStr("local"), live_model="gpt-4o")  # not a Live model
    result = replay_fast(np.zeros(RATE, np.int16), scenario=load_scenario("default"), settings=settings, voice="tone",
                         on_wire=wire)
    start = next(e for d, e in frames if d == "out" and e["type"] == "session.start")
    assert isinstance(start.get("event_id"), str) and start["event_id"]
    error = next(e for d, e in frames if d == "in" and e["type"] == "error")
    assert (error.get("client_event_id") or error["error"].get("client_event_id")) == start["event_id"]
    fatal = [e for e in result.events if isinstance(e, SessionError) and e.fatal]
    assert len(fatal) == 1 and fatal[0].message.startswith("the session could not start: ")
    assert "gpt-4o" in fatal[0].message
