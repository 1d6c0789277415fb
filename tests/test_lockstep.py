"""The lockstep loop: virtual time moves only when every task waits, and never past a thread's work."""

from __future__ import annotations

import asyncio
import threading

import pytest

from voxline.base.clock import VirtualClock
from voxline.session.lockstep import run_lockstep


def test_sleepers_wake_in_deadline_order_at_their_virtual_deadlines() -> None:
    clock = VirtualClock()
    seen: list[tuple[float, str]] = []

    async def sleeper(name: str, dt: float, n: int) -> None:
        for _ in range(n):
            await clock.sleep(dt)
            seen.append((round(clock.now(), 6), name))

    async def main() -> None:
        await asyncio.gather(sleeper("a", 0.02, 3), sleeper("b", 0.03, 2))

    run_lockstep(main(), clock)
    assert seen == [(0.02, "a"), (0.03, "b"), (0.04, "a"), (0.06, "b"), (0.06, "a")]


def test_time_stands_still_while_a_thread_works() -> None:
    clock, release, entered = VirtualClock(), threading.Event(), threading.Event()
    ticks: list[float] = []

    def blocking() -> float:
        entered.set()
        assert release.wait(10)
        return clock.now()

    async def ticker() -> None:
        for _ in range(5):
            await clock.sleep(0.02)
            ticks.append(round(clock.now(), 6))

    async def main() -> tuple[float, float]:
        await clock.sleep(0.01)
        job = asyncio.ensure_future(asyncio.to_thread(blocking))
        tick = asyncio.ensure_future(ticker())
        await asyncio.to_thread(entered.wait, 10)
        assert ticks == []  # the ticker's first deadline (0.03) has not been reached while the thread works
        release.set()
        inside = await job
        await tick
        return inside, clock.now()

    inside, end = run_lockstep(main(), clock)
    assert inside == pytest.approx(0.01)
    assert ticks == [0.03, 0.05, 0.07, 0.09, 0.11] and end == pytest.approx(0.11)


def test_a_run_is_the_same_every_time() -> None:
    def once() -> list[float]:
        clock, out = VirtualClock(), []

        async def main() -> None:
            async def worker(dt: float) -> None:
                for _ in range(20):
                    await clock.sleep(dt)
                    out.append(clock.now())
                    await asyncio.sleep(0)

            await asyncio.gather(worker(0.013), worker(0.007), worker(0.02))

        run_lockstep(main(), clock)
        return out

    assert once() == once()
