"""``voxline talk --record DIR``: the recorder writes MIC.wav, HEARD.wav, EVENTS.jsonl and the report.

The session is the one ``talk`` runs, with the devices swapped for a recording as the
microphone and a clocked output reading the recorder's tapped playout, in lockstep on a
virtual clock; what it writes must be what a replay of the same input hears.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxline.audio import wavio
from voxline.audio.wavio import read_wav
from voxline.base.errors import OutputError
from voxline.base.clock import VirtualClock
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.cli import main
from voxline.session.lockstep import run_lockstep
from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording, mic_blocks
from voxline.session.record import SessionRecorder
from voxline.session.replay import engine_connector, replay_fast
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.ci import require_tool
from tests.support.cli import EXAMPLE

RATE = 24000
LONG = load_scenario("long")


def record(samples: np.ndarray, directory: Path) -> list[Path]:
    clock = VirtualClock()
    recorder = SessionRecorder(directory)

    async def session_run() -> list[Path]:
        origin = clock.now()
        output = ClockedOutput(clock, origin=origin, playout=recorder.playout)
        recorder.now = output.now

        async def device() -> AsyncIterator[tuple[float, np.ndarray]]:  # (capture time, block), as MicSource gives
            async for block in Recording(samples, clock, origin):
                yield output.now() - len(block) / RATE, block

        session = VoiceSession(SessionSettings(api_key="local"), output=output, clock=clock,
                               input=mic_blocks(recorder.mic(device())),
                               connector=engine_connector(LONG, clock, voice="espeak", on_wire=recorder.wire))
        async with session:
            while not (session.input_finished and session.idle):
                for event in session.pending_events():
                    recorder.event(event)
                recorder.drain()
                await clock.sleep(0.02)
        for event in session.pending_events():
            recorder.event(event)
        return recorder.close(session.metrics(), mode="lockstep test")

    return run_lockstep(session_run(), clock)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_tool("espeak-ng")
    samples = read_wav(EXAMPLE)[0]
    directory = tmp_path_factory.mktemp("rec") / "session"
    paths = record(samples, directory)
    return {"samples": samples, "dir": directory, "paths": paths}


def test_the_recording_holds_every_file(recorded: dict[str, Any]) -> None:
    names = sorted(p.name for p in recorded["paths"])
    assert names == ["EVENTS.jsonl", "HEARD.wav", "MIC.wav", "REPORT.html", "SUMMARY.json"]
    assert all(p.exists() and p.stat().st_size > 0 for p in recorded["paths"])


def test_mic_and_heard_are_what_a_replay_of_the_same_input_gets(recorded: dict[str, Any]) -> None:
    samples, directory = recorded["samples"], recorded["dir"]
    mic = read_wav(directory / "MIC.wav")[0]
    assert np.array_equal(mic[: len(samples)], samples) and not mic[len(samples):].any()
    heard = read_wav(directory / "HEARD.wav")[0]
    replayed = replay_fast(samples, scenario=LONG, voice="espeak").heard
    assert replayed is not None and np.abs(replayed).max() > 0
    n = min(len(heard), len(replayed))
    assert n >= len(samples)
    assert np.array_equal(heard[:n], replayed[:n])  # sample for sample, the cut's fade included


def test_events_and_summary_agree_on_the_cut(recorded: dict[str, Any]) -> None:
    directory = recorded["dir"]
    lines = [json.loads(line) for line in (directory / "EVENTS.jsonl").read_text().splitlines()]
    assert {line["dir"] for line in lines} == {"in", "out", "local"}
    (truncate,) = [l["event"] for l in lines if l["event"].get("type") == "conversation.item.truncate"]
    (heard,) = [l["event"] for l in lines if l["event"].get("type") == "HeardTranscript"]
    assert [l["event"]["type"] for l in lines if l["event"].get("type") == "TurnMetrics"]
    summary = json.loads((directory / "SUMMARY.json").read_text())
    (cut,) = summary["barge_ins"]
    assert cut["audio_end_ms"] == truncate["audio_end_ms"] and cut["heard_text"] == heard["text"]
    assert heard["full_text"].startswith(heard["text"]) and heard["estimate"] is True
    assert cut["silent_at"] == pytest.approx(6.045, abs=1e-6)  # on the recording's timeline, as in the replay
    assert summary["pass"]


def test_a_stop_in_capture_is_silence_in_mic_wav_and_the_files_stay_in_step(tmp_path: Path) -> None:
    """A microphone stream that ended and was opened again 3 s later: its next block lands 3 s on in MIC.wav, where
    HEARD.wav has what the listener heard meanwhile. Before, MIC.wav went on as if nothing had stopped."""
    recorder = SessionRecorder(tmp_path / "rec")
    blocks = watched_blocks(recorder, [(0.0 + 0.02 * k, k + 1) for k in range(50)]  # 1 s from 0.0
                            + [(4.0 + 0.02 * k, 100 + k) for k in range(50)]  # 1 s from 4.0
                            + [(5.0 + 0.025, 200)]  # 25 ms late: one timestamp's jitter, not a stop
                            + [(5.02 + 0.02 * k, 201 + k) for k in range(10)])  # and on time again
    assert len(blocks) == 111
    recorder.close(None, mode="test")
    mic, _rate = read_wav(tmp_path / "rec" / SessionRecorder.MIC)
    assert len(mic) == 5 * RATE + 11 * 480
    assert mic[RATE - 1] == 50 and not mic[RATE:4 * RATE].any() and mic[4 * RATE] == 100
    assert mic[5 * RATE] == 200 and mic[5 * RATE + 480] == 201  # follows on: nothing shifted for good


def watched_blocks(recorder: SessionRecorder, blocks: list[tuple[float, int]]) -> list[tuple[float, np.ndarray]]:
    """``(capture time, value)`` as 20 ms blocks through the recorder's microphone tap, as ``talk`` hands them."""
    async def device() -> AsyncIterator[tuple[float, np.ndarray]]:
        for adc, value in blocks:
            yield adc, np.full(480, value, np.int16)

    async def taken() -> list[tuple[float, np.ndarray]]:
        return [item async for item in recorder.mic(device())]

    return asyncio.run(taken())


def test_record_into_a_missing_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["talk", "--record", str(tmp_path / "no" / "such")]) == 1
    err = capsys.readouterr().err
    assert err == f"voxline talk: error: --record: no such directory {tmp_path / 'no'}\n"


def test_a_recording_that_cannot_go_on_stops_and_the_microphone_goes_on(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, MIC.wav's write failing (a full disk; the 4 GiB a WAV holds, after 24.8 hours) raised out of the
    microphone's blocks: the session lost its input. Here a WAV holds one second."""
    monkeypatch.setattr(wavio, "MAX_WAV_BYTES", 44 + 2 * RATE)
    recorder = SessionRecorder(tmp_path / "rec")
    blocks = watched_blocks(recorder, [(0.02 * k, 1 + k % 100) for k in range(250)])  # 5 s
    assert len(blocks) == 250  # every block reached the session
    assert recorder.failure is not None and "4 GiB" in recorder.failure
    with pytest.raises(OutputError, match=r"^the recording in .* stopped: cannot write .*MIC\.wav: it holds the"):
        recorder.close(None, mode="test")
    mic, _rate = read_wav(tmp_path / "rec" / SessionRecorder.MIC)
    timeline = np.repeat((1 + np.arange(250) % 100).astype(np.int16), 480)
    assert 0 < len(mic) <= RATE and np.array_equal(mic, timeline[: len(mic)])  # the whole writes that fitted


def test_the_event_log_is_written_as_lines_come_due_while_no_microphone_block_comes(tmp_path: Path) -> None:
    """A recording's event log was flushed only as microphone blocks came: with the microphone gone and the server
    quiet, its last lines waited, and a killed `talk --record` lost them."""
    from voxline.session.events import StateChanged

    clock = VirtualClock()
    recorder = SessionRecorder(tmp_path / "take", now=clock.now)
    events = tmp_path / "take" / SessionRecorder.EVENTS

    async def main() -> list[str]:
        async with recorder.flushing(clock):
            recorder.event(StateChanged("listening", at=clock.now()))
            await clock.sleep(2.0)  # no block, no event: only the log's own flushes
            return events.read_text().splitlines()

    try:
        lines = run_lockstep(main(), clock)
    finally:
        recorder.abandon()
    assert len(lines) == 1 and json.loads(lines[0])["event"]["state"] == "listening"
