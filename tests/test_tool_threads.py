"""Blocking tools run on their own bounded threads; a tool past its timeout frees its place."""

from __future__ import annotations

import asyncio
import threading

import pytest

from voxline.realtime.errors import ToolError
from voxline.session.tools import ToolRegistry, ToolThreads
from voxline.session.tools.registry import TIMED_OUT


def test_at_most_workers_jobs_run_at_once() -> None:
    pool = ToolThreads(workers=2)
    gate = threading.Event()
    started = threading.Semaphore(0)

    def job() -> str:
        started.release()
        gate.wait()
        return "done"

    futures = [pool.submit(job) for _ in range(5)]
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    assert pool.stats() == {"counted": 2, "idle": 0, "abandoned": 0, "queued": 3}  # no third thread
    gate.set()
    assert [f.result(timeout=10) for f in futures] == ["done"] * 5


def test_a_thread_with_nothing_to_do_ends_and_the_pool_still_runs_the_next_job() -> None:
    """A registry made per session: before, each left an idle thread waiting for the life of the process."""
    pool = ToolThreads(workers=2, idle_s=0.05, name="voxline-test-idle")
    assert pool.submit(threading.current_thread).result(timeout=10).name.startswith("voxline-test-idle")
    worker = next(t for t in threading.enumerate() if t.name.startswith("voxline-test-idle"))
    worker.join(timeout=10)  # ends on its own once idle_s passed with no job
    assert not worker.is_alive()
    assert pool.stats() == {"counted": 0, "idle": 0, "abandoned": 0, "queued": 0}
    assert pool.submit(lambda: "again").result(timeout=10) == "again"  # a new thread takes the next job


@pytest.mark.parametrize(("given", "message"), [
    ({"workers": float("nan")}, "ToolThreads: workers takes a whole number, not float"),
    ({"workers": "8"}, "ToolThreads: workers takes a whole number, not str"),
    ({"workers": 0}, "ToolThreads: workers takes a whole number ≥ 1, not 0"),
    ({"max_abandoned": -1}, "ToolThreads: max_abandoned takes a whole number ≥ 0, not -1"),
    ({"idle_s": 0}, "ToolThreads: idle_s takes a number > 0, not 0"),
])
def test_a_pool_made_with_a_bad_value_is_one_tool_error(given: dict[str, object], message: str) -> None:
    """Before, ``workers=nan`` made a pool that never ran a job, and ``"8"`` a bare TypeError."""
    with pytest.raises(ToolError) as refused:
        ToolThreads(**given)  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_an_abandoned_job_gives_its_place_to_the_next() -> None:
    pool = ToolThreads(workers=1)
    stuck, running = threading.Event(), threading.Event()

    def hang() -> None:
        running.set()
        stuck.wait()

    hung = pool.submit(hang)
    assert running.wait(timeout=10)
    second = pool.submit(lambda: 42)
    assert not second.done()
    pool.abandon(hung)  # the caller timed out: the next job must not wait behind the stuck one
    assert second.result(timeout=10) == 42
    assert pool.stats()["abandoned"] == 1
    stuck.set()
    hung.result(timeout=10)
    assert pool.stats()["abandoned"] == 0  # the abandoned thread ended after its job


def test_lingering_threads_are_bounded() -> None:
    pool = ToolThreads(workers=1, max_abandoned=1)
    stuck = threading.Event()
    running = threading.Semaphore(0)

    def hang() -> None:
        running.release()
        stuck.wait()

    first = pool.submit(hang)
    assert running.acquire(timeout=10)
    pool.abandon(first)
    second = pool.submit(hang)
    assert running.acquire(timeout=10)
    pool.abandon(second)  # two lingering threads: more than max_abandoned
    third = pool.submit(lambda: "ran")
    assert not third.done()  # waits rather than growing the process
    stuck.set()
    assert third.result(timeout=10) == "ran"


def test_one_stuck_tool_cannot_take_every_lingering_place_from_the_others() -> None:
    """A registry shared by many sessions: one tool hanging on every call had all 32 lingering places abandoned to
    it, and then every blocking tool of every session waited (and timed out) behind it."""
    pool = ToolThreads(workers=2, max_abandoned=4, max_stuck=2)
    stuck = threading.Event()
    running = threading.Semaphore(0)

    def hang() -> None:
        running.release()
        stuck.wait()

    hung = [pool.submit_as("lookup", hang) for _ in range(2)]
    for job in hung:
        assert running.acquire(timeout=10)
        pool.abandon(job)  # its caller timed out
    refused = pool.submit_as("lookup", hang)
    with pytest.raises(ToolError, match="^lookup is stuck: 2 earlier calls of it have not returned, and it is not "
                                        "run again until one does$"):
        refused.result(timeout=0)
    assert pool.submit_as("quick", lambda: "ran").result(timeout=10) == "ran"  # the others' places are theirs
    assert pool.stats()["abandoned"] == 2
    stuck.set()  # the stuck calls return: the tool runs again
    for job in hung:
        job.result(timeout=10)
    assert pool.submit_as("lookup", lambda: "back").result(timeout=10) == "back"


async def test_a_stuck_tools_calls_are_answered_at_once_and_the_other_tools_run() -> None:
    registry = ToolRegistry(threads=ToolThreads(workers=2, max_stuck=1))
    stuck = threading.Event()

    @registry.tool(timeout=0.05)
    def lookup() -> str:
        stuck.wait()
        return "late"

    @registry.tool(timeout=5)
    def quick() -> str:
        return "ran"

    tool, other = registry.get("lookup"), registry.get("quick")
    assert tool is not None and other is not None

    async def let_go(why: str | None) -> None:  # as the runner does: on a timeout with TIMED_OUT, on a close without
        call = asyncio.ensure_future(tool.invoke({}, registry.threads))
        # until the job runs on its thread: taken off the queue (a thread counted may not have taken it yet,
        # and a job cancelled while queued never ran, so it is no stuck one)
        while (stats := registry.threads.stats())["counted"] == 0 or stats["queued"] > 0:
            await asyncio.sleep(0.001)
        call.cancel(why)
        with pytest.raises(asyncio.CancelledError):
            await call

    await asyncio.wait_for(let_go(None), 10)  # a session closing while the call runs: not the tool's fault
    await asyncio.wait_for(let_go(TIMED_OUT), 10)
    try:
        with pytest.raises(ToolError, match="^lookup is stuck: 1 earlier call of it has not returned"):
            await asyncio.wait_for(tool.invoke({}, registry.threads), 10)  # run, it would wait with the others
        assert await asyncio.wait_for(other.invoke({}, registry.threads), 10) == "ran"
    finally:
        stuck.set()


async def test_blocking_tools_do_not_hold_the_default_executor() -> None:
    """A barge-in's device abort runs in the loop's default executor; saturated tools must not delay it."""
    registry = ToolRegistry(threads=ToolThreads(workers=64))
    gate = threading.Event()

    @registry.tool(timeout=None)
    def block() -> str:
        gate.wait()
        return "late"

    tool = registry.get("block")
    waits = [asyncio.ensure_future(tool.invoke({}, registry.threads)) for _ in range(64)]
    await asyncio.sleep(0)
    try:  # more blocking calls than the default executor has threads, and it still answers at once
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "abort"), timeout=10) == "abort"
    finally:
        gate.set()
    assert await asyncio.gather(*waits) == ["late"] * 64


async def test_cancelling_a_blocking_call_abandons_it() -> None:
    registry = ToolRegistry(threads=ToolThreads(workers=1))
    gate = threading.Event()

    @registry.tool(timeout=None)
    def block() -> str:
        gate.wait()
        return "late"

    @registry.tool(timeout=None)
    def quick() -> str:
        return "quick"

    hung = asyncio.ensure_future(registry.get("block").invoke({}, registry.threads))
    await asyncio.sleep(0.01)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung
    assert await asyncio.wait_for(registry.get("quick").invoke({}, registry.threads), timeout=10) == "quick"
    gate.set()


def test_a_burst_after_a_quiet_spell_runs_side_by_side() -> None:
    """With one idle worker, each job of a burst only woke that worker: three jobs ran one after another."""
    pool = ToolThreads(workers=4)
    assert pool.submit(lambda: 1).result(timeout=10) == 1  # one worker, idle now
    gate = threading.Event()
    started = threading.Semaphore(0)

    def job() -> str:
        started.release()
        gate.wait(timeout=30)
        return "done"

    futures = [pool.submit(job) for _ in range(3)]
    assert all(started.acquire(timeout=10) for _ in range(3))  # all three running at once, none waiting its turn
    gate.set()
    assert [f.result(timeout=10) for f in futures] == ["done"] * 3
