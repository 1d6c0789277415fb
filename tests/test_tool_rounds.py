"""A server that calls tools for ever does not keep a session busy for good, and a stop ends a replay
even when no time passes on its virtual clock.

The scenario's one turn is a tool call, played again after the last (``after_last = "cycle"``): each
answer asks for a response, which is the same call, at the same instant of a lockstep replay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
from pydantic import SecretStr

from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.replay.driver import replay_fast
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolRegistry
from voxline.session.tools.events import ToolFinished
from tests.support.engine_harness import silence, speech

CALLING = 'name = "calling"\nafter_last = "cycle"\n[[turns]]\n[[turns.output]]\ncall = "get_time"\n' \
          'arguments = { zone = "UTC" }\n'


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "noon"

    return registry


def _said() -> np.ndarray:
    return np.concatenate([silence(0.5), speech(1.0), silence(3.0)])


def test_tool_rounds_without_the_user_stop_at_max_tool_rounds_and_say_so(tmp_path: Path) -> None:
    (tmp_path / "calling.toml").write_text(CALLING)
    settings = SessionSettings(api_key=SecretStr("local"), max_tool_rounds=5)
    result = replay_fast(_said(), scenario=load_scenario(tmp_path / "calling.toml"), settings=settings,
                         voice="tone", tools=_registry(), tail_s=10.0)
    rounds = [e for e in result.events if isinstance(e, ToolFinished)]
    errors = [e for e in result.events if isinstance(e, SessionError)]
    assert len(rounds) == 6  # five answered and followed up, the sixth answered with no follow-up
    assert [(e.code, e.fatal) for e in errors] == [("tool_rounds_exceeded", False)]
    assert errors[0].message.startswith("6 tool rounds in a row without a user turn (max_tool_rounds 5): the "
                                        "outputs of resp_")
    assert not result.interrupted


def test_a_stop_ends_a_replay_whose_virtual_clock_stands_still(tmp_path: Path) -> None:
    """Before, the stop was looked at by the replay's next step, due 100 ms of virtual time later: with the
    server and the tools answering each other in one instant, that step never came, and only a second signal
    ended the command."""
    (tmp_path / "calling.toml").write_text(CALLING)
    settings = SessionSettings(api_key=SecretStr("local"), max_tool_rounds=400)
    stop = asyncio.Event()
    calls: list[bool] = []  # whether the stop had come, at each call
    registry = ToolRegistry()

    @registry.tool
    async def get_time(zone: str) -> str:
        """The time in a zone."""
        calls.append(stop.is_set())
        if len(calls) == 20:
            stop.set()  # a signal arrives now
        return "noon"

    result = replay_fast(_said(), scenario=load_scenario(tmp_path / "calling.toml"), settings=settings,
                         voice="tone", tools=registry, tail_s=10.0, stop=stop)
    assert result.interrupted
    assert calls.count(True) < 5  # ended there, not 380 rounds later
