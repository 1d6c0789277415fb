"""An alarm brings a caller's next step forward, on a virtual clock and in a real loop's stepper."""

from __future__ import annotations

import asyncio

import pytest

from voxline.base.clock import RealClock, VirtualClock
from voxline.base.steps import Alarm, _steppers, run_steps


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Sleepy:
    """A step that asks to be called again ``every`` seconds later; what times it was called at."""

    def __init__(self, every: float, until: float) -> None:
        self.every, self.until, self.calls = every, until, []  # type: list[float]

    def __call__(self, now: float) -> float | None:
        self.calls.append(now)
        return now + self.every if now < self.until else None


async def test_a_ring_on_a_virtual_clock_brings_the_next_step_to_its_time() -> None:
    clock, alarm, step = VirtualClock(), Alarm(), Sleepy(10.0, 25.0)
    task = asyncio.ensure_future(run_steps(clock, step, 0.0, alarm))
    await settle()
    assert step.calls == [0.0] and alarm.armed and clock.next_deadline() == 10.0
    clock.advance_to(1.0)
    alarm.ring(3.5)
    alarm.ring(7.0)  # later than the step it brought forward: nothing
    await settle()
    assert step.calls == [0.0] and clock.next_deadline() == 3.5
    clock.advance_to(3.5)
    await settle()
    assert step.calls == [0.0, 3.5] and clock.next_deadline() == 13.5  # its old deadline (10) went with its wait
    alarm.ring(3.5)  # now: at once, with no advance
    await settle()
    assert step.calls == [0.0, 3.5, 3.5]
    clock.advance_to(13.5)
    await settle()
    clock.advance_to(23.5)
    await settle()
    clock.advance_to(33.5)
    await settle()
    assert step.calls == [0.0, 3.5, 3.5, 13.5, 23.5, 33.5] and task.done()
    await task
    assert not alarm.armed
    alarm.ring(0.0)  # no call holds it: nothing


async def test_a_ring_in_a_real_loop_makes_the_step_soon_and_only_once() -> None:
    clock, alarm = RealClock(), Alarm()
    calls: list[float] = []
    rang = asyncio.get_running_loop().create_future()

    def step(now: float) -> float | None:
        calls.append(now)
        if len(calls) == 1:
            rang.set_result(None)
            alarm.ring(now)  # from its own step: the time the step returns stands
        return None if len(calls) >= 2 else now + 3600.0

    task = asyncio.ensure_future(run_steps(clock, step, clock.now() + 3600.0, alarm))
    await settle()
    assert calls == [] and alarm.armed
    alarm.ring(clock.now())
    alarm.ring(clock.now())  # twice: one step
    await asyncio.wait_for(asyncio.shield(rang), 5)
    await settle()
    assert len(calls) == 1 and not task.done()
    alarm.ring(-float("inf"))
    await asyncio.wait_for(task, 5)
    assert len(calls) == 2 and not alarm.armed
    assert _steppers[asyncio.get_running_loop()].callers == 0


async def test_a_ring_from_another_step_reaches_a_step_already_made_in_that_pass() -> None:
    clock, alarm = RealClock(), Alarm()
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    start = clock.now() + 0.05

    def ringer(now: float) -> float | None:
        calls.append("ringer")
        alarm.ring(now)
        return None

    def sleeper(now: float) -> float | None:
        calls.append("sleeper")
        return None if calls.count("sleeper") >= 2 else now + 3600.0

    # the sleeper goes first in the pass at ``start``; the ringer, after it in the same pass, rings it (once
    # more at once, not in an hour)
    sleeping = asyncio.ensure_future(run_steps(clock, sleeper, start, alarm))
    ringing = asyncio.ensure_future(run_steps(clock, ringer, start))
    await asyncio.wait_for(asyncio.gather(sleeping, ringing), 5)
    assert calls == ["sleeper", "ringer", "sleeper"]
    assert loop.time() >= start


async def test_a_ring_after_the_call_was_cancelled_does_nothing() -> None:
    clock, alarm = RealClock(), Alarm()
    calls: list[float] = []
    task = asyncio.ensure_future(run_steps(clock, lambda now: calls.append(now) or now + 3600.0,
                                           clock.now() + 3600.0, alarm))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    alarm.ring(clock.now())
    await settle()
    assert calls == [] and not alarm.armed


async def test_an_alarm_serves_one_call_at_a_time() -> None:
    clock, alarm = VirtualClock(), Alarm()
    first = asyncio.ensure_future(run_steps(clock, lambda now: now + 1.0, 0.0, alarm))
    await settle()
    with pytest.raises(ValueError, match="one run_steps at a time"):
        await run_steps(clock, lambda now: None, 0.0, alarm)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not alarm.armed
    with pytest.raises(ValueError, match="nan"):
        alarm.ring(float("nan"))


async def test_an_alarm_on_a_clock_of_another_kind_is_never_armed() -> None:
    class Other:
        def __init__(self) -> None:
            self.inner = VirtualClock()

        def now(self) -> float:
            return self.inner.now()

        def wall(self) -> float:
            return self.inner.wall()

        async def sleep_until(self, t: float) -> None:
            await self.inner.sleep_until(t)

        async def sleep(self, dt: float) -> None:
            await self.inner.sleep(dt)

    clock, alarm = Other(), Alarm()
    task = asyncio.ensure_future(run_steps(clock, lambda now: now + 1.0 if now < 2 else None, 0.0, alarm))
    await settle()
    assert not alarm.armed  # an owner of the alarm takes this to mean: step on time, do not sleep long
    alarm.ring(0.0)
    for t in (1.0, 2.0):
        clock.inner.advance_to(t)
        await settle()
    await asyncio.wait_for(task, 5)


def test_a_virtual_clocks_waiter_is_resolved_at_the_first_of_its_times() -> None:
    async def main() -> None:
        clock = VirtualClock()
        waiter = clock.waiter(5.0)
        clock.bring_forward(waiter, 2.0)
        clock.bring_forward(waiter, 4.0)
        clock.advance_to(2.0)
        assert waiter.done()
        assert clock.next_deadline() is None  # the later times went with it
        assert clock.waiter(1.0).done()  # reached already
        late = clock.waiter(9.0)
        clock.bring_forward(late, 1.0)  # reached already: at once
        assert late.done()
        with pytest.raises(ValueError, match="nan"):
            clock.waiter(float("nan"))

    asyncio.run(main())


async def test_a_step_ringing_itself_for_sooner_than_it_was_due_changes_nothing() -> None:
    for clock in (RealClock(), VirtualClock()):
        alarm = Alarm()
        calls: list[float] = []

        def step(now: float) -> float | None:
            calls.append(now)
            alarm.ring(now - 1.0)  # from its own step: the time it returns stands
            return now + 3600.0

        task = asyncio.ensure_future(run_steps(clock, step, clock.now(), alarm))
        await settle()
        await settle()
        assert len(calls) == 1 and not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
