"""voxline's own GPT-Live client against ``voxline serve``, end to end in real time.

The tool a Live session's Responses backend asks for runs once through the session's
``ToolRegistry``, and the backend's answer is heard; over WebRTC the session's audio is the
call's media track, and what the listener heard is the reply the stand-in spoke. Every frame
on the server's sockets goes through the ``openai.types.live`` oracle.
"""

from __future__ import annotations


import numpy as np
import pytest
from pydantic import SecretStr

from voxline.base.clock import RealClock
from voxline.realtime.server import serve
from voxline.session.events import AssistantAudioStarted, HeardTranscript
from voxline.session.replay.driver import run_replay
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry, ToolStarted
from tests.support.live_oracle import LiveWire
from tests.support.local_server import config

pytestmark = pytest.mark.slow  # real time, a few seconds each

RATE = 24_000
QUESTION = "What is the weather in Paris?"
GREETING = ("Hello! This is the voxline local server. I can tell when you speak, but I do not understand speech, "
            "so my replies are scripted.")  # the default scenario's first reply


def _speech(seconds: float) -> np.ndarray:
    """A voiced tone the stand-in's energy detector takes for speech."""
    t = np.arange(int(seconds * RATE)) / RATE
    return (6000 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.int16)


def _recording(tail_s: float) -> np.ndarray:
    gap = np.zeros(RATE // 2, np.int16)
    return np.concatenate([gap, _speech(1.0), np.zeros(int(tail_s * RATE), np.int16)])


async def test_a_live_sessions_tool_runs_once_through_the_registry_and_its_answer_is_heard() -> None:
    registry = ToolRegistry()
    calls: list[dict[str, str]] = []

    @registry.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, object]:
        """Current weather for a city."""
        calls.append({"city": city, "unit": unit})
        return {"city": city, "sky": "clear", "temperature": 21, "unit": unit}

    wire = LiveWire()
    async with serve(config(scenario="tools", transcripts=(QUESTION,), api_key=None, on_wire=wire,
                            speed=4.0)) as server:
        settings = SessionSettings(api="live", url=server.url, api_key=SecretStr("local"), turn_detection="none")
        result = await run_replay(_recording(9.0), connector=None, clock=RealClock(), settings=settings,
                                  tools=registry, tail_s=2.0)
    assert calls == [{"city": "Paris", "unit": "celsius"}]  # once
    finished = [e for e in result.events if isinstance(e, ToolFinished)]
    assert [(e.name, e.ok) for e in finished] == [("get_weather", True)]
    assert sum(isinstance(e, ToolStarted) for e in result.events) == 1
    said = " ".join(e.text for e in result.events if isinstance(e, HeardTranscript))  # utterances heard to the end
    assert "I have the weather report now" in said, said  # the backend's answer after the tool's output
    sent = wire.verify()
    assert sent.count("session.delegation.created") == 1 and "response.event" in sent
    assert result.heard is not None and np.abs(result.heard).max() > 1000  # the listener heard the replies


async def test_a_live_session_over_webrtc_plays_the_calls_media_track() -> None:
    wire = LiveWire()
    async with serve(config(transcripts=(QUESTION,), api_key=None, on_wire=wire, speed=4.0)) as server:
        settings = SessionSettings(api="live", transport="webrtc", url=server.url, api_key=SecretStr("local"),
                                   turn_detection="none")
        # the replay ends once idle (the reply heard to its end); the tail only bounds a machine too busy for that
        result = await run_replay(_recording(11.0), connector=None, clock=RealClock(), settings=settings, tail_s=8.0)
    assert any(isinstance(e, AssistantAudioStarted) for e in result.events)
    heard = [e.text.strip() for e in result.events if isinstance(e, HeardTranscript)]  # utterances heard to the end
    # the stand-in's default reply, played at the pace of the track; its words placed by the session timeline,
    # the first one included: the track's first sample is the timeline's zero
    assert heard[:1] == [GREETING], heard
    assert result.heard is not None
    spoken = np.flatnonzero(np.abs(result.heard) > 1000)
    assert len(spoken) > RATE // 2  # half a second and more of the reply reached the listener through the track
    sent = wire.verify()  # the data channel's events, through the same oracle
    assert sent[0] == "session.started"
