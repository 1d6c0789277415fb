"""Real clients written for the service, unchanged, against the local server on loopback.

Each client runs in its own virtual environment (``tests/clients/<name>/``, built by
``.ci/install-clients``); the server runs here, so the oracle sees every frame both ways.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxline.audio.synth import synthesize
from voxline.audio.wavio import write_wav
from voxline.realtime.server import serve
from tests.support.ci import require_tool
from tests.support.local_server import config
from tests.support.oracle import WireRecorder
from tests.support.real_clients import DriverRun, run_driver

RATE = 24000


def user_speech(tmp_path: Path, text: str, name: str = "user.wav") -> Path:
    require_tool("espeak-ng")
    speech = synthesize(text, "espeak")
    path = tmp_path / name
    write_wav(path, np.concatenate([np.zeros(RATE // 4, np.int16), speech]))
    return path


async def drive(client: str, scenario: str, *audio: Path) -> DriverRun:
    """``client`` speaks each WAV, in turn, to a local server playing ``scenario``; every frame is checked."""
    recorder = WireRecorder()
    async with serve(config(recorder, scenario=scenario, voice="tone", speed=8.0, api_key=None)) as server:
        run = await run_driver(client, server.url, *(arg for path in audio for arg in ("--audio", str(path))))
    recorder.verify()
    return run


@pytest.mark.slow
async def test_openai_agents_runs_the_tool_and_speaks_the_answer(tmp_path: Path) -> None:
    run = await drive("openai_agents", "tools", user_speech(tmp_path, "What is the weather in Paris?"))
    result = run.result
    assert result["errors"] == [], run.log
    assert result["tools"] == ["get_weather"]
    assert result["assistant"][-1] == "I have the weather report now. Thank you for waiting."
    assert "Traceback" not in run.log and "ERROR" not in run.log, run.log


@pytest.mark.slow
async def test_livekit_holds_a_conversation_with_no_error_logged(tmp_path: Path) -> None:
    first = user_speech(tmp_path, "What is the weather in Paris?", "first.wav")
    second = user_speech(tmp_path, "Please cancel my order.", "second.wav")
    run = await drive("livekit", "listen", first, second)
    result = run.result
    assert "failed to transcribe" not in run.log and "ERROR" not in run.log, run.log
    assert result["errors"] == [], result
    assert len(result["user"]) == 2 and "weather" in result["user"][0].lower(), result
    assert "cancel my order" in result["user"][1].lower(), result
    assert result["assistant"][-1] == "Your order is cancelled.", result
    assert result["audio_frames"] > 0


@pytest.mark.slow
async def test_pipecat_hears_the_question_runs_the_tool_and_speaks_the_answer(tmp_path: Path) -> None:
    run = await drive("pipecat", "listen", user_speech(tmp_path, "What is the weather in Paris?"))
    result = run.result
    assert result["errors"] == [] and "| ERROR" not in run.log, run.log
    assert result["tools"] == ["get_weather"], result
    assert len(result["user"]) == 1 and "weather" in result["user"][0].lower(), result
    assert result["assistant"][-2:] == ["Let me check the weather.", "Here is the weather report. Anything else?"]
    assert result["audio_frames"] > 0
