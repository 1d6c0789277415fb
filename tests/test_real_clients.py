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
from tests.support.real_clients import run_driver

RATE = 24000


def user_speech(tmp_path: Path, text: str) -> Path:
    require_tool("espeak-ng")
    speech = synthesize(text, "espeak")
    path = tmp_path / "user.wav"
    write_wav(path, np.concatenate([np.zeros(RATE // 4, np.int16), speech]))
    return path


@pytest.mark.slow
async def test_openai_agents_runs_the_tool_and_speaks_the_answer(tmp_path: Path) -> None:
    audio = user_speech(tmp_path, "What is the weather in Paris?")
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="tools", voice="tone", speed=8.0, api_key=None)) as server:
        run = await run_driver("openai_agents", server.url, "--audio", str(audio))
    result = run.result
    assert result["errors"] == [], run.log
    assert result["tools"] == ["get_weather"]
    assert result["assistant"][-1] == "I have the weather report now. Thank you for waiting."
    assert "Traceback" not in run.log and "ERROR" not in run.log, run.log
    recorder.verify()
