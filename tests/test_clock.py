"""Clocks: the virtual clock moves only when told and wakes sleepers in deadline order."""

from __future__ import annotations

import asyncio

import pytest

from voxline.base.clock import Clock, RealClock, VirtualClock


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_time_stands_still_until_advanced() -> None:
    clock = VirtualClock(start=10.0)
    woke: list[float] = []

    async def sleeper() -> None:
        await clock.sleep(0.5)
        woke.append(clock.now())

    async with asyncio.TaskGroup() as tg:
        tg.create_task(sleeper())
        await settle()
        assert clock.now() == 10.0 and woke == [] and clock.next_deadline() == 10.5
        clock.advance(0.4)
        await settle()
        assert woke == []
        clock.advance(0.1)
        await settle()
    assert woke == [10.5]
    assert clock.next_deadline() is None


async def test_sleepers_wake_in_deadline_order_then_fifo() -> None:
    clock = VirtualClock()
    order: list[str] = []

    async def sleeper(name: str, t: float) -> None:
        await clock.sleep_until(t)
        order.append(name)

    async with asyncio.TaskGroup() as tg:
        for name, t in [("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("late", 9.0)]:
            tg.create_task(sleeper(name, t))
        await settle()
        assert clock.sleepers == 5
        clock.advance_to(5.0)
        await settle()
        assert order == ["a", "b1", "b2", "c"]
        assert clock.next_deadline() == 9.0
        clock.advance_to(9.0)
    assert order[-1] == "late"


async def test_lockstep_driver_can_jump_from_deadline_to_deadline() -> None:
    clock = VirtualClock()
    ticks: list[float] = []

    async def ticker() -> None:
        start = clock.now()
        for k in range(1, 6):
            await clock.sleep_until(start + k * 0.02)
            ticks.append(clock.now())

    async with asyncio.TaskGroup() as tg:
        tg.create_task(ticker())
        await settle()
        while (deadline := clock.next_deadline()) is not None:
            clock.advance_to(deadline)
            await settle()
    assert ticks == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.10])


async def test_cancelled_sleepers_are_forgotten() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(clock.sleep_until(1.0))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.next_deadline() is None and clock.sleepers == 0
    clock.advance_to(2.0)  # nothing to wake, nothing raised


async def test_a_past_deadline_returns_without_advancing() -> None:
    clock = VirtualClock(start=3.0)
    await clock.sleep_until(1.0)
    await clock.sleep(0)
    assert clock.now() == 3.0


def test_the_clock_never_goes_backwards() -> None:
    clock = VirtualClock(start=1.0)
    with pytest.raises(ValueError):
        clock.advance(-0.1)
    with pytest.raises(ValueError):
        clock.advance_to(0.5)


async def test_real_clock_is_a_clock_and_past_deadlines_return() -> None:
    clock = RealClock()
    assert isinstance(clock, Clock) and isinstance(VirtualClock(), Clock)
    before = clock.now()
    await clock.sleep_until(before - 1.0)
    assert clock.now() >= before


async def test_real_clock_sleepers_of_one_millisecond_share_one_timer() -> None:
    from voxline.base.clock import _timers_of  # the loop's shared timers

    clock = RealClock()
    loop = asyncio.get_running_loop()
    timers = _timers_of(loop)
    before = timers.pending
    deadline = clock.now() + 0.05
    woke: list[float] = []

    async def sleeper(t: float) -> None:
        await clock.sleep_until(t)
        woke.append(clock.now() - t)

    tasks = [asyncio.create_task(sleeper(deadline + i * 1e-5)) for i in range(50)]  # all within one ms slot
    late = asyncio.create_task(sleeper(deadline + 0.01))
    cancelled = asyncio.create_task(sleeper(deadline))
    await settle()
    assert timers.pending - before <= 3  # 52 sleepers, one or two slots for the 51, one for the late one
    cancelled.cancel()
    await asyncio.gather(*tasks, late)
    assert len(woke) == 51 and all(w >= 0 for w in woke)  # none woke before its deadline
    assert cancelled.cancelled()
