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


def test_tasks_started_while_waiting_are_cancelled_too(capsys: pytest.CaptureFixture[str]) -> None:
    started: list[str] = []

    async def hydra(n: int) -> None:  # each cancel starts the next head
        started.append(f"hydra{n}")
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            if n < 3:
                asyncio.get_running_loop().create_task(hydra(n + 1), name=f"hydra{n + 1}")
            raise

    async def main() -> None:
        asyncio.get_running_loop().create_task(hydra(0), name="hydra0")
        await asyncio.sleep(0)

    with bounded_runner(None) as runner:
        runner.run(main())
        loop = runner.get_loop()
    assert loop.is_closed() and started == ["hydra0", "hydra1", "hydra2", "hydra3"]
    assert capsys.readouterr().err == ""


def test_a_task_spinning_on_a_lockstep_loop_is_left_after_real_time(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from voxline.base.clock import VirtualClock
    from voxline.session.lockstep import LockstepLoop

    monkeypatch.setattr(loop_runner, "CLOSE_S", 0.2)

    async def spinner() -> None:  # never lets the lockstep clock move: only real time can bound the wait
        while True:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                pass

    async def main() -> None:
        asyncio.get_running_loop().create_task(spinner(), name="tool spin")
        await asyncio.sleep(0)

    with bounded_runner(lambda: LockstepLoop(VirtualClock())) as runner:
        runner.run(main())
        loop = runner.get_loop()
    assert loop.is_closed()
    assert capsys.readouterr().err == "voxline: left running, as it ignored its cancel: tool spin\n"


def test_run_lockstep_leaves_a_task_that_ignores_its_cancel(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """replay_fast's runner: a tool left running after its call was answered kept the run from returning for as
    long as it swallowed its cancels (for ever, for one that loops)."""
    from voxline.base.clock import VirtualClock
    from voxline.session.lockstep import run_lockstep

    monkeypatch.setattr(loop_runner, "CLOSE_S", 0.2)

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                pass

    async def main() -> str:
        asyncio.get_running_loop().create_task(stubborn(), name="tool lookup")
        await asyncio.sleep(0)
        return "replayed"

    assert run_lockstep(main(), VirtualClock()) == "replayed"
    assert capsys.readouterr().err == "voxline: left running, as it ignored its cancel: tool lookup\n"


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


EVENT_WAITER = '''
import asyncio
from voxline import ToolRegistry

registry = ToolRegistry()


@registry.tool(timeout=1)
async def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather; after its cancel it waits on an event only it holds."""
    never = asyncio.Event()
    while True:
        try:
            await never.wait()
        except asyncio.CancelledError:
            pass
'''


@pytest.mark.parametrize("mode", [pytest.param(["--fast"], id="lockstep"),
                                  pytest.param([], id="real-time", marks=pytest.mark.slow)])
@pytest.mark.parametrize("source", [STUBBORN, EVENT_WAITER], ids=["sleeps", "waits-on-its-own-event"])
def test_a_replay_whose_tool_ignores_its_cancel_exits_once_it_wrote_everything(tmp_path: Path, mode: list[str],
                                                                              source: str) -> None:
    (tmp_path / "stubborn.py").write_text(source)
    heard, events = tmp_path / "h.wav", tmp_path / "e.jsonl"
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), *mode, "--scenario", "tools", "--voice", "tone",
                          "--tools", "stubborn:registry", "--out", str(heard), "--events", str(events)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert "get_weather timed out after 1 s" in events.read_text()
    assert run.stderr.splitlines()[-1] == "voxline: left running, as it ignored its cancel: tool get_weather"
    assert "Task was destroyed" not in run.stderr


# the loop commands run on in real time: asyncio's own, or uvloop as VOXLINE_EVENT_LOOP says


def _loop_of(factory: object) -> str:
    with bounded_runner(factory) as runner:  # type: ignore[arg-type]
        return loop_runner.loop_name(runner.get_loop())


def test_a_command_runs_on_asyncio_unless_uvloop_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loop_runner.EVENT_LOOP_ENV, raising=False)
    assert loop_runner.real_time_loop() is None and _loop_of(None) == "asyncio"
    for choice in ("asyncio", " AsyncIO ", "", "  "):
        monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, choice)
        assert _loop_of(None) == "asyncio", choice
    for choice in ("uvloop", " UVLoop "):
        monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, choice)
        assert _loop_of(None) == "uvloop", choice


def test_a_loop_the_command_asks_for_is_taken_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxline.base.clock import VirtualClock
    from voxline.session.lockstep import LockstepLoop

    monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, "uvloop")
    assert _loop_of(lambda: LockstepLoop(VirtualClock())) == "LockstepLoop"


def test_a_choice_it_cannot_honour_is_an_error_even_where_the_command_brings_its_own_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from voxline.base.clock import VirtualClock
    from voxline.base.errors import VoxlineError
    from voxline.session.lockstep import LockstepLoop

    monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, " Tokio ")
    with pytest.raises(VoxlineError, match="VOXLINE_EVENT_LOOP is 'Tokio': give one of asyncio, uvloop"):
        _loop_of(lambda: LockstepLoop(VirtualClock()))


def test_asking_for_uvloop_where_it_is_not_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from voxline.base.errors import VoxlineError

    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it now fails, as where it is not installed
    monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, "uvloop")
    with pytest.raises(VoxlineError, match=r"VOXLINE_EVENT_LOOP=uvloop, but uvloop is not installed \(pip install"):
        loop_runner.real_time_loop()
    monkeypatch.delenv(loop_runner.EVENT_LOOP_ENV)
    assert _loop_of(None) == "asyncio"  # nobody asked: nothing missing


def test_a_choice_it_does_not_know_is_one_line_naming_the_variable_and_the_choices() -> None:
    from tests.support.cli import one_line_error, voxline

    run = voxline("devices", "--json", env={loop_runner.EVENT_LOOP_ENV: "tokio"})
    assert run.returncode == 1
    assert one_line_error(run) == "voxline devices: error: VOXLINE_EVENT_LOOP is 'tokio': give one of asyncio, uvloop"


@pytest.mark.parametrize(("choice", "loop"), [("", "asyncio"), ("uvloop", "uvloop")])
def test_the_command_says_at_debug_which_loop_it_runs_on(choice: str, loop: str) -> None:
    from tests.support.cli import voxline

    run = voxline("--log-level", "debug", "devices", "--json", env={loop_runner.EVENT_LOOP_ENV: choice})
    assert f"event loop: {loop}" in run.stderr, run.stderr


def test_the_stand_alone_server_entry_says_a_choice_it_cannot_honour_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from voxline.realtime.server import run_serve

    monkeypatch.setenv(loop_runner.EVENT_LOOP_ENV, "tokio")
    assert run_serve(["--port", "0"]) == 1
    assert capsys.readouterr().err == ("voxline serve: error: VOXLINE_EVENT_LOOP is 'tokio': "
                                       "give one of asyncio, uvloop\n")
