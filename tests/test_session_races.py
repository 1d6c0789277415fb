"""Races that break other clients, made impossible by construction, shown against the built-in server.

* a barge-in while a tool is running: the cut is exact and the tool's output still goes
  out exactly once, followed by exactly one ``response.create``;
* a response started by the server's VAD while a tool runs: the tool's ``response.create``
  waits for it (no ``conversation_already_has_active_response``), and nothing is lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxline.base.clock import VirtualClock
from voxline.audio.synth import synthesize
from voxline.realtime.connection import connect
from voxline.realtime.server import ServerConfig, serve
from voxline.session import BargeIn, SessionSettings, ToolFinished, ToolRegistry, ToolStarted, TranscriptDone, VoiceSession
from voxline.session.events import SpeechStarted
from voxline.audio.clocked_output import ClockedOutput
from tests.support.oracle import WireRecorder, sent
from tests.support.session_events import collect

RACE = str(Path(__file__).parent / "scenarios" / "race.toml")


def slow_tools(release: asyncio.Event, runs: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=30)
    async def slow_lookup(query: str) -> str:
        """Looks something up, slowly."""
        runs.append(query)
        await release.wait()
        return "9:00-17:00"

    return tools


async def test_barge_in_while_a_tool_runs() -> None:
    rec, clock, release, runs = WireRecorder(), VirtualClock(), asyncio.Event(), []
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"), scenario=RACE)) as server:
        settings = SessionSettings(url=server.url, api_key="sk-test", turn_detection="none")

        async def connector() -> Any:
            return await connect(server.url, "sk-test", on_wire=rec)

        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                                tools=slow_tools(release, runs)) as session:
            await session.send_text("when do you open?")
            await collect(session, clock, lambda e: isinstance(e, ToolStarted))
            for _ in range(25):  # half a second of the preamble reaches the listener
                clock.advance(0.02)
                await asyncio.sleep(0)
            await session.interrupt()
            barge = [e for e in await collect(session, clock, lambda e: isinstance(e, BargeIn)) if isinstance(e, BargeIn)]
            release.set()
            done = await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "lookup is done" in e.text)
    rec.verify()
    assert runs == ["opening hours"]
    assert [e.ok for e in done if isinstance(e, ToolFinished)] == [True]
    (truncate,) = sent(rec, "conversation.item.truncate")
    assert truncate["audio_end_ms"] == barge[-1].audio_end_ms and 480 <= truncate["audio_end_ms"] <= 540
    outputs = [c for c in sent(rec, "conversation.item.create") if c["item"]["type"] == "function_call_output"]
    assert len(outputs) == 1
    assert len(sent(rec, "response.create")) == 2  # the user's request and exactly one follow-up


async def speech_then_silence(blocks: asyncio.Queue[np.ndarray | None]) -> AsyncIterator[np.ndarray]:
    while (block := await blocks.get()) is not None:
        yield block


@pytest.mark.slow
async def test_a_vad_response_racing_with_tool_output_never_collides() -> None:
    rec, clock, release, runs = WireRecorder(), VirtualClock(), asyncio.Event(), []
    blocks: asyncio.Queue[np.ndarray | None] = asyncio.Queue()
    # the server speaks in real time, so the VAD-started reply is still active when the tool finishes
    async with serve(ServerConfig(port=0, voice="tone", speed=1.0, scenario=RACE)) as server:
        settings = SessionSettings(url=server.url, api_key="sk-test", turn_detection="server_vad")

        async def connector() -> Any:
            return await connect(server.url, "sk-test", on_wire=rec)

        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                                input=speech_then_silence(blocks), tools=slow_tools(release, runs)) as session:
            await session.send_text("when do you open?")
            await collect(session, clock, lambda e: isinstance(e, ToolStarted))
            voice = np.concatenate([synthesize("hello there, are you still there", "tone"), np.zeros(24_000, np.int16)])
            for i in range(0, len(voice), 480):
                blocks.put_nowait(voice[i : i + 480])
            await collect(session, clock, lambda e: isinstance(e, SpeechStarted))
            while not any(json.loads(t)["type"] == "response.created" and "still working" not in t
                          for d, t in rec.frames[-40:] if d == "in"):
                await asyncio.sleep(0.01)
            release.set()  # the tool finishes while the VAD-started reply is still being spoken
            done = await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "lookup is done" in e.text,
                                 limit_s=120)
            blocks.put_nowait(None)
    rec.verify()
    errors = [json.loads(t) for d, t in rec.frames if d == "in" and json.loads(t)["type"] == "error"]
    assert errors == []  # in particular no conversation_already_has_active_response
    assert runs == ["opening hours"]
    assert [e.ok for e in done if isinstance(e, ToolFinished)] == [True]
    outputs = [c for c in sent(rec, "conversation.item.create") if c["item"]["type"] == "function_call_output"]
    assert len(outputs) == 1
    assert len(sent(rec, "response.create")) == 2
