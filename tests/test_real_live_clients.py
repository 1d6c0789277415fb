"""Real GPT-Live clients, unchanged, against the local server's Live endpoint on loopback.

pipecat's ``OpenAILiveLLMService``, LiveKit Agents' ``GPTLiveModel`` and pydantic-ai's
``OpenAILiveModel`` each run in their own virtual environment (``tests/clients/<name>/``, built by
``.ci/install-clients``) and speak a recorded question into a Live session; the server runs here,
so every frame both ways goes through the ``openai.types.live`` oracle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxline.audio.synth import synthesize
from voxline.audio.wavio import write_wav
from voxline.realtime.server import serve
from tests.support.ci import require_tool
from tests.support.live_oracle import LiveWire
from tests.support.local_server import config
from tests.support.real_clients import run_driver

pytestmark = pytest.mark.slow  # a process per client, real time

RATE = 24000
QUESTION = "What is the weather in Paris?"


def user_speech(tmp_path: Path) -> Path:
    require_tool("espeak-ng")
    path = tmp_path / "user.wav"
    write_wav(path, np.concatenate([np.zeros(RATE // 4, np.int16), synthesize(QUESTION, "espeak")]))
    return path


async def converse(name: str, tmp_path: Path, *args: str, scenario: str = "default") -> tuple[dict[str, object], list[str], str]:
    wire = LiveWire()
    settings = config(scenario=scenario, transcripts=(QUESTION,), api_key=None, on_wire=wire)
    async with serve(settings) as server:
        run = await run_driver(name, server.url, "--audio", str(user_speech(tmp_path)), *args, timeout=90.0)
    assert "Traceback" not in run.log, run.log
    return run.result, wire.verify(), server.scenario.turns[0].outputs[0].text  # type: ignore[union-attr]


async def test_pipecat_live_hears_the_question_and_speaks_the_reply(tmp_path: Path) -> None:
    result, sent, reply = await converse("pipecat_live", tmp_path)
    assert result["started"] is True
    assert result["user"] == [QUESTION]
    assert result["assistant"] == reply
    assert sent[0] == "session.started" and sent[-1] == "session.closed"


async def test_livekit_gpt_live_hears_the_question_and_speaks_the_reply(tmp_path: Path) -> None:
    result, sent, reply = await converse("livekit_live", tmp_path)
    assert result["errors"] == []
    assert result["user"] == [QUESTION]
    assert result["assistant"] == reply
    assert "session.closed" in sent


async def test_pydantic_ai_live_hears_the_question_and_speaks_the_reply(tmp_path: Path) -> None:
    result, sent, reply = await converse("pydantic_ai_live", tmp_path)
    assert result["user"] == [QUESTION]
    assert result["assistant"] == [reply]
    assert "session.closed" in sent


async def test_pydantic_ai_live_runs_the_tool_the_backend_asks_for(tmp_path: Path) -> None:
    result, sent, _ = await converse("pydantic_ai_live", tmp_path, "--tool", scenario="tools")
    assert result["tools"] == ["get_weather"]  # once: a function_call from the Responses backend, answered once
    assert [text.strip() for text in result["assistant"]] == [  # type: ignore[union-attr]
        "Let me check the weather for you.", "I have the weather report now. Thank you for waiting."]
    assert "session.delegation.created" in sent and "response.event" in sent


async def test_livekit_gpt_live_runs_the_tool_through_responses_delegation(tmp_path: Path) -> None:
    result, sent, _ = await converse("livekit_live", tmp_path, "--tool", scenario="tools")
    assert result["errors"] == []
    assert result["tools"] == ["get_weather"]
    assert result["assistant"] == "Let me check the weather for you.I have the weather report now. Thank you for waiting."
    assert sent.count("session.delegation.created") == 1
