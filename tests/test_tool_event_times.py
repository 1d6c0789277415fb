"""Tool events carry the listener time they happened at, so lines and logs place them in order.

Before, a tool's line was stamped when the application read it, which could be after later
events that carry their own time (a turn's reply heard), and the console printed times that ran
backwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voxline.audio.wavio import read_wav
from voxline.base.clock import VirtualClock
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay import replay_fast
from voxline.session.tools import ToolFinished, ToolRegistry, ToolStarted
from tests.support.farm import make_recording


def _tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temperature": 21, "unit": unit}

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    return tools


def test_each_tool_event_has_the_listener_time_its_output_was_sent(tmp_path: Path) -> None:
    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    clock = VirtualClock()
    sent: list[float] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"function_call_output"' in text:
            sent.append(clock.now())

    result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=_tools(), clock=clock,
                         on_wire=on_wire, tail_s=5.0)
    started = [e for e in result.events if isinstance(e, ToolStarted)]
    finished = [e for e in result.events if isinstance(e, ToolFinished)]
    assert finished and len(finished) == len(started) == len(sent), result.events
    assert all(e.ok for e in finished)
    assert [e.at for e in finished] == pytest.approx(sent, abs=1e-6)  # answered and sent in the same step
    for start, done in zip(started, finished, strict=True):
        assert start.at is not None and done.at is not None and start.at <= done.at
