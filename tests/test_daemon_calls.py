"""off_loop: a blocking call on a daemon thread, waited for a bounded time of real time."""

from __future__ import annotations

import asyncio
import threading

import pytest

from voxline.base.clock import VirtualClock
from voxline.base.daemon_calls import CallStuck, off_loop
from voxline.session.lockstep import run_lockstep


async def test_its_result_and_what_it_raises_come_back() -> None:
    assert await off_loop(sum, [1, 2, 3], timeout_s=5, name="t-sum") == 6

    def fails() -> None:
        raise OSError("the device went away")

    with pytest.raises(OSError, match="the device went away"):
        await off_loop(fails, timeout_s=5, name="t-fails")


async def test_a_call_that_does_not_return_is_stuck_on_a_daemon_thread_and_the_loop_goes_on() -> None:
    release = threading.Event()
    try:
        with pytest.raises(CallStuck, match="^t-stuck did not return within 0.1 s$"):
            await off_loop(release.wait, timeout_s=0.1, name="t-stuck")
        [thread] = [t for t in threading.enumerate() if t.name == "t-stuck"]
        assert thread.daemon and thread.is_alive()  # nothing joins it: not the loop's close, not the exit
    finally:
        release.set()


async def test_a_cancelled_wait_leaves_the_call_to_end_alone() -> None:
    release = threading.Event()

    def late_failure() -> None:
        release.wait()
        raise RuntimeError("ended after its waiter left")

    waiter = asyncio.ensure_future(off_loop(late_failure, timeout_s=30, name="t-cancelled"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()  # its error, later, is nobody's: no 'exception was never retrieved'


def test_a_lockstep_loop_holds_its_virtual_clock_while_the_call_runs() -> None:
    """A raw thread let virtual time run 52,000 s ahead during 0.3 s of thread work; the loop counts these jobs."""
    clock = VirtualClock()
    never = threading.Event()

    def work() -> float:
        never.wait(0.3)  # thread work that takes real time while the loop has nothing else to do
        return clock.now()

    async def main() -> tuple[float, float]:
        sleeper = asyncio.ensure_future(clock.sleep(1000.0))  # a deadline the clock would jump to if idle
        during = await off_loop(work, timeout_s=10, name="t-lockstep")
        after = clock.now()
        sleeper.cancel()
        return during, after

    during, after = run_lockstep(main(), clock)
    assert during == 0.0 and after == 0.0
