"""The command's loop closes without waiting for ever on a task that ignores its cancel: a tool that
swallows ``CancelledError`` no longer keeps ``voxline replay`` (or a farm's worker) from exiting."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

import voxline.base.loop_runner as loop_runner
from voxline.base.loop_runner import bounded_runner
from tests.support.cli import EXAMPLE, VOXLINE


def test_a_task_that_ignores_its_cancel_is_named_and_left(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(loop_runner, "CLOSE_S", 0.05)
    cancels: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                cancels.append(1)

    async def main() -> str:
        asyncio.get_running_loop().create_task(stubborn(), name="tool get_weather")
        await asyncio.sleep(0)
        return "written"

    with bounded_runner(None) as runner:
        assert runner.run(main()) == "written"
        loop = runner.get_loop()
    assert loop.is_closed() and cancels == [1]
    assert capsys.readouterr().err == "voxline: left running, as it ignored its cancel: tool get_weather\n"


def test_tasks_that_end_when_cancelled_close_the_loop_as_asyncio_does(capsys: pytest.CaptureFixture[str]) -> None:
    ended: list[str] = []

    async def polite() -> None:
        try:
            await asyncio.sleep(100)
        finally:
            ended.append("cleaned up")

    async def main() -> None:
        asyncio.get_running_loop().create_task(polite())
        await asyncio.sleep(0)

    with bounded_runner(None) as runner:
        runner.run(main())
        loop = runner.get_loop()
    assert loop.is_closed() and ended == ["cleaned up"] and capsys.readouterr().err == ""


STUBBORN = '''
import asyncio
from voxline import ToolRegistry

registry = ToolRegistry()


@registry.tool(timeout=1)
async def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather; it never answers and swallows every cancel."""
    while True:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            pass
'''


@pytest.mark.parametrize("mode", [pytest.param(["--fast"], id="lockstep"),
                                  pytest.param([], id="real-time", marks=pytest.mark.slow)])
def test_a_replay_whose_tool_ignores_its_cancel_exits_once_it_wrote_everything(tmp_path: Path, mode: list[str]) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    heard, events = tmp_path / "h.wav", tmp_path / "e.jsonl"
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), *mode, "--scenario", "tools", "--voice", "tone",
                          "--tools", "stubborn:registry", "--out", str(heard), "--events", str(events)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert "get_weather timed out after 1 s" in events.read_text()
    assert run.stderr.splitlines()[-1] == "voxline: left running, as it ignored its cancel: tool get_weather"
