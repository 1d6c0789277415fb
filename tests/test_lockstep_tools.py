"""Tools in lockstep: their timeouts fire on the session's clock as in real time, and a stuck
tool holds up its own recording only. Blocking tools, and the thread work an async tool starts.

A tool that hangs is released when the test ends (a thread cannot be stopped); its timeout is
read on the virtual clock, never measured with wall time.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from voxline.audio.wavio import read_wav
from voxline.base.clock import VirtualClock
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.lockstep import GRACE_S, LockstepLoop, follows_real_time, run_lockstep, waiting_for_tool
from voxline.session.replay import replay_fast
from voxline.session.replay.farm import FarmOptions, FarmRecording, run_part
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry
from tests.support.farm import make_recording


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()  # the stuck thread ends with the test


def test_a_paced_job_lets_its_clock_follow_real_time_and_a_held_job_does_not(gate: threading.Event) -> None:
    clock = VirtualClock()

    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        with follows_real_time():
            stuck = loop.run_in_executor(None, gate.wait, 30)
        await clock.sleep(GRACE_S + 0.2)  # fires only if virtual time moves while the job works
        at = clock.now()
        gate.set()
        return await stuck, at

    released, at = run_lockstep(main(), clock)
    assert released and at == pytest.approx(GRACE_S + 0.2)


def test_a_job_holds_up_its_own_clock_only(gate: threading.Event) -> None:
    async def main() -> tuple[bool, float, float]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, LockstepLoop)

        async def stuck() -> tuple[bool, float]:
            with loop.own_clock() as mine:
                with follows_real_time():
                    job = loop.run_in_executor(None, gate.wait, 60)
                released = await job
                return released, mine.now()

        async def busy() -> float:
            with loop.own_clock() as other:
                for _ in range(100):  # 100 s of its own time while the other's tool is stuck
                    await other.sleep(1.0)
                gate.set()
                return other.now()

        (released, stuck_at), other_at = await asyncio.gather(stuck(), busy())
        return released, stuck_at, other_at

    released, stuck_at, other_at = run_lockstep(main(), VirtualClock())
    assert released  # let go by the other session, not given up on after a minute
    assert other_at == 100.0 and stuck_at < 100.0


def _registry(gate: threading.Event, timeout: float, stuck_s: float = 30.0) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=timeout)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Weather that never comes: the service it asks is stuck."""
        gate.wait(stuck_s)
        return {"city": city, "temperature": 21, "unit": unit}

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    return tools


def test_a_stuck_blocking_tool_times_out_on_the_virtual_clock(tmp_path: Path, gate: threading.Event) -> None:
    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=_registry(gate, 0.5),
                         tail_s=5.0)
    finished = [e for e in result.events if isinstance(e, ToolFinished) and e.name == "get_weather"]
    assert finished, result.events
    first = finished[0]
    assert not first.ok and "timed out after 0.5 s" in first.output
    assert first.duration_s == pytest.approx(0.5, abs=0.021)  # the timeout's own instant on the session's clock


@pytest.mark.slow
def test_a_stuck_tool_holds_up_only_its_own_recording_in_a_fast_farm(tmp_path: Path, gate: threading.Event) -> None:
    global STUCK_TOOLS
    STUCK_TOOLS = _registry(gate, 150.0, stuck_s=120.0)
    for n in range(3):
        make_recording(tmp_path / f"r{n}.wav", n, n != 1)
    recordings = [FarmRecording(name=f"r{n}", path=tmp_path / f"r{n}.wav", scenario="tools" if n == 0 else None,
                                tools=f"{__name__}:STUCK_TOOLS" if n == 0 else None).model_dump(mode="json")
                  for n in range(3)]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, jobs=3, voice="tone")
    seen: list[bool] = []

    def watch() -> None:  # r1 and r2 end while r0's tool is still stuck; then it is let go
        for _ in range(1200):
            if all(_finished(tmp_path / "out" / name / "heard.wav") for name in ("r1", "r2")):
                seen.append(not gate.is_set())
                break
            if gate.wait(0.05):
                break
        gate.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rows = run_part(recordings, options)
    watcher.join(5)
    assert seen == [True]  # both were whole on disk before the stuck tool was let go
    assert [r["name"] for r in rows] == ["r0", "r1", "r2"]
    assert all(r["status"] == "pass" for r in rows), rows


def _finished(path: Path) -> bool:
    """A heard.wav that covers the whole six-second recording."""
    try:
        return path.stat().st_size >= 44 + 6 * 24000 * 2
    except OSError:
        return False


STUCK_TOOLS: ToolRegistry | None = None  # the stuck recording's registry, named MODULE:ATTR in its manifest entry


def test_an_async_tools_thread_work_is_timed_as_a_blocking_tools(tmp_path: Path) -> None:
    """What an async tool hands to a thread (``asyncio.to_thread``, a DNS lookup) lets the session's
    time follow real time too: a stuck one reaches the tool's timeout, instead of holding the
    session's clock still for as long as it hangs."""
    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    tools = ToolRegistry()

    @tools.tool(read_only=True, timeout=0.5)
    async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Weather from a service whose client blocks in a thread."""
        # 1.5 s of real time in a thread: past the 0.5 s timeout once the grace is over (the thread
        # lives on the loop's own executor, which the replay waits for at its end)
        await asyncio.to_thread(threading.Event().wait, 1.5)
        return {"city": city, "temperature": 21, "unit": unit}

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=tools, tail_s=5.0)
    finished = [e for e in result.events if isinstance(e, ToolFinished) and e.name == "get_weather"]
    assert finished, result.events
    assert not finished[0].ok and "timed out after 0.5 s" in finished[0].output
    assert finished[0].duration_s == pytest.approx(0.5, abs=0.021)  # its own instant on the session's clock


def test_an_async_tool_awaiting_a_real_time_peer_gets_its_answer(tmp_path: Path) -> None:
    """An async tool that asks a service over a socket (answering in 50 ms of real time) or awaits a timer of
    the loop is waited for as a blocking tool is: the session's time stands still, so its timeout of 10 s on
    the virtual clock does not fire before the answer comes."""
    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    tools = ToolRegistry()
    peers: list[threading.Thread] = []

    @tools.tool(read_only=True, timeout=10)
    async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Weather from a service that answers on a socket."""
        ours, theirs = socket.socketpair()

        def service() -> None:
            with theirs:
                time.sleep(0.05)  # its own work, in real time
                theirs.sendall(b"21\n")

        peer = threading.Thread(target=service)
        peers.append(peer)
        peer.start()
        reader, writer = await asyncio.open_connection(sock=ours)
        try:
            temperature = int(await reader.readline())
        finally:
            writer.close()
        await asyncio.sleep(0.05)  # a timer of the loop, in real time too
        return {"city": city, "temperature": temperature, "unit": unit}

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    try:
        result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=tools, tail_s=5.0)
    finally:
        for peer in peers:
            peer.join(5)
    finished = [e for e in result.events if isinstance(e, ToolFinished) and e.name == "get_weather"]
    assert finished, result.events
    assert all(f.ok and '"temperature":21' in f.output.replace(" ", "") for f in finished), finished
    assert all(f.duration_s < GRACE_S for f in finished)  # a quick tool changes nothing on the session's clock


def test_a_tool_that_sleeps_on_its_sessions_clock_holds_nothing_and_one_waiting_on_real_time_does() -> None:
    """The session waits for a tool's task: while the task awaits one of its clock's sleepers (a simulated latency)
    the clock moves to it at once; while it awaits anything else (a socket, a timer of the loop, an event) the
    clock stands still for the grace, as for a blocking tool."""
    clock = VirtualClock()

    async def main() -> tuple[list[float | None], list[float | None], float]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, LockstepLoop)
        released = asyncio.Event()

        async def simulated() -> None:
            await clock.sleep(30.0)

        async def real() -> None:
            await released.wait()

        sleeping, waiting = asyncio.create_task(simulated()), asyncio.create_task(real())
        await asyncio.sleep(0)  # both now wait
        seen_sleeping: list[float | None] = []
        seen_waiting: list[float | None] = []
        with waiting_for_tool(sleeping):
            seen_sleeping.append(loop._tool_waits[0].horizon(time.monotonic()))
            await sleeping  # 30 s on the session's clock, at once
        with waiting_for_tool(waiting):
            seen_waiting.append(loop._tool_waits[0].horizon(time.monotonic()))
            released.set()
            await waiting
        return seen_sleeping, seen_waiting, clock.now()

    sleeping, waiting, at = run_lockstep(main(), clock)
    assert sleeping == [None] and waiting == [30.0] and at == 30.0  # held where the clock stood


def test_an_approval_a_person_gives_in_real_time_holds_the_sessions_time_as_a_tool_does(tmp_path: Path) -> None:
    """An approval callback that waits for a person (a kiosk's touch screen, answering from its UI thread) is
    waited for as an awaited tool is: the session's time follows real time meanwhile. Before, the clock ran free
    while the callback waited: thousands of virtual seconds in one of real time, the session expired, and came
    back, again and again."""
    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    clock = VirtualClock()
    tools = ToolRegistry()
    asked: list[float] = []
    ran: list[float] = []
    taps: list[threading.Timer] = []

    @tools.tool(needs_approval=True, timeout=10)
    def get_weather(city: str, unit: str = "celsius") -> str:
        """The weather."""
        ran.append(clock.now())
        return "sunny"

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    async def approve(call: Any) -> bool:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool] = loop.create_future()
        asked.append(clock.now())
        tap = threading.Timer(0.6, loop.call_soon_threadsafe, (answer.set_result, True))  # the visitor taps "yes"
        taps.append(tap)
        tap.start()
        return await answer

    try:
        result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=tools, tail_s=5.0,
                             clock=clock, approve=approve)
    finally:
        for tap in taps:
            tap.cancel()
            tap.join(5)
    assert asked and len(ran) == len(asked), (asked, ran)
    # about 0.6 s, as real time passed; before, thousands: the bound is loose, so a slow machine cannot fail it
    assert all(0 < done - ask < 60.0 for ask, done in zip(asked, ran)), (asked, ran)
    assert not [e for e in result.events if type(e).__name__ in ("ConnectionLost", "SessionError")], result.events


def test_an_approval_nobody_gives_refuses_the_call_after_its_wait_and_the_session_goes_on(tmp_path: Path) -> None:
    """A kiosk's visitor who walks away: before, the call stayed owed for good (the session never idle again) and
    every later approval queued behind it. Now the call is refused once APPROVAL_WAIT_S of the session's clock
    passed, and the model is told so."""
    from voxline.session.tools.runner import APPROVAL_WAIT_S

    make_recording(tmp_path / "ask.wav", 1, False)
    samples, _rate = read_wav(tmp_path / "ask.wav")
    clock = VirtualClock()
    tools = ToolRegistry()
    asked: list[float] = []

    @tools.tool(needs_approval=True)
    def get_weather(city: str, unit: str = "celsius") -> str:
        """The weather."""
        return "sunny"

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        return "12:00"

    async def approve(call: Any) -> bool:
        asked.append(clock.now())
        await clock.sleep(10 * APPROVAL_WAIT_S)  # nobody there: the answer would come long after
        return True

    result = replay_fast(samples, scenario=load_scenario("tools"), voice="tone", tools=tools,
                         tail_s=2 * APPROVAL_WAIT_S, clock=clock, approve=approve)
    refused = [e for e in result.events if isinstance(e, ToolFinished) and e.name == "get_weather"]
    assert asked and len(refused) == len(asked), result.events
    assert all(not f.ok and f"no answer came within {APPROVAL_WAIT_S:g} s to whether get_weather may run" in f.output
               for f in refused)
    assert all(f.at is not None and f.at == pytest.approx(ask + APPROVAL_WAIT_S, abs=0.1)
               for f, ask in zip(refused, asked))
