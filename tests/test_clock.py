"""Clocks: the virtual clock moves only when told and wakes sleepers in deadline order."""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable

import pytest

from voxline.base.clock import TIMER_SLOT_S, Clock, RealClock, VirtualClock
from voxline.base.steps import GATHER_FROM, GATHER_S, _steppers, run_steps


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


async def test_real_clock_reads_the_loops_time_without_asking_which_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    clock = RealClock()
    first = loop.time()
    now = clock.now()
    assert first <= now <= loop.time()  # the same timeline as the loop's

    def asked() -> asyncio.AbstractEventLoop:  # a system call each time (asyncio checks the process id)
        raise AssertionError("the clock asked for the running loop")

    monkeypatch.setattr(asyncio, "get_running_loop", asked)
    monkeypatch.setattr(asyncio, "_get_running_loop", asked)
    assert clock.now() >= now


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


async def test_steps_on_a_real_clock_are_made_by_the_loop_and_never_early() -> None:
    clock = RealClock()
    start = clock.now() + 0.02
    seen: dict[int, list[tuple[float, float, object]]] = {i: [] for i in range(40)}

    def stepper(i: int, period: float) -> Callable[[float], float]:
        due = [start + i * 1e-4]

        def step(now: float) -> float:
            seen[i].append((due[0], now, asyncio.current_task()))
            due[0] += period
            return due[0]

        return step

    callers = [asyncio.create_task(run_steps(clock, stepper(i, 0.01 if i % 2 else 0.015), start + i * 1e-4))
               for i in range(40)]
    await asyncio.sleep(0.1)
    for caller in callers:
        caller.cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    assert all(len(steps) >= 4 for steps in seen.values())
    assert all(now >= due for steps in seen.values() for due, now, _task in steps)  # never before it was due
    runners = {task for steps in seen.values() for _due, _now, task in steps}
    assert runners == {None}  # the loop's stepper made every step, in a callback: none of the callers


@pytest.mark.parametrize("callers", [GATHER_FROM, GATHER_FROM + 1])
async def test_a_loop_stepping_many_callers_arms_its_wake_up_on_a_coarser_grid(callers: int) -> None:
    """Past ``GATHER_FROM`` callers the stepper's one timer goes on the 4 ms grid: every step due within the same
    4 ms is made by one wake-up, none before it is due (a 1 ms grid would wake once per millisecond due)."""
    loop = asyncio.get_running_loop()
    clock = RealClock()
    k = math.ceil((clock.now() + 60.0) / GATHER_S)  # a 4 ms grid line a minute ahead: no step comes due meanwhile
    earliest = k * GATHER_S + 0.0005  # half a millisecond past it
    # all but the last due a second later: the last to join, the earliest, arms the timer with all of them counted
    dues = [earliest + 1.0 + i * 1e-4 for i in range(callers - 1)] + [earliest]
    tasks = []
    for due in dues:
        tasks.append(asyncio.create_task(run_steps(clock, lambda now: now + 1.0, due)))
        await settle()
    stepper = _steppers[loop]
    assert stepper.callers == callers
    if callers > GATHER_FROM:
        assert stepper.grid == GATHER_S and stepper._timer_at == pytest.approx((k + 1) * GATHER_S, abs=1e-9)
    else:
        assert stepper.grid == TIMER_SLOT_S
        assert stepper._timer_at == pytest.approx(k * GATHER_S + TIMER_SLOT_S, abs=1e-9)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert stepper.callers == 0 and stepper.grid == TIMER_SLOT_S


async def test_a_failing_step_ends_its_own_caller_and_the_others_go_on() -> None:
    clock = RealClock()
    counts = {"good": 0, "bad": 0}

    def good(now: float) -> float:
        counts["good"] += 1
        return now + 0.002

    def bad(now: float) -> float:
        counts["bad"] += 1
        if counts["bad"] == 3:
            raise RuntimeError("the sink went away")
        return now + 0.002

    keeps = asyncio.create_task(run_steps(clock, good, clock.now()))
    with pytest.raises(RuntimeError, match="the sink went away"):
        await run_steps(clock, bad, clock.now())
    before = counts["good"]
    await asyncio.sleep(0.02)
    assert counts["bad"] == 3 and counts["good"] > before  # the failed one is gone, the other still steps
    keeps.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeps
    late = counts["good"]
    await asyncio.sleep(0.01)
    assert counts["good"] == late  # a cancelled caller is never stepped again
    assert _steppers[asyncio.get_running_loop()].callers == 0  # the one that raised and the one cancelled: gone


async def test_an_earlier_step_wakes_a_stepper_asleep_towards_a_later_one() -> None:
    clock = RealClock()
    woke: list[float] = []
    slow = asyncio.create_task(run_steps(clock, lambda now: now + 10.0, clock.now() + 10.0))  # asleep for 10 s
    await settle()
    due = clock.now() + 0.01

    def once(now: float) -> float:
        woke.append(now - due)
        raise LookupError("done")  # any exception ends its caller

    with pytest.raises(LookupError):
        await asyncio.wait_for(run_steps(clock, once, due), 1.0)
    assert len(woke) == 1 and 0 <= woke[0] < 0.5
    slow.cancel()
    await asyncio.gather(slow, return_exceptions=True)


async def test_steps_on_a_virtual_clock_follow_its_deadline_order() -> None:
    clock = VirtualClock()
    order: list[tuple[str, float]] = []

    def every(name: str, period: float) -> Callable[[float], float]:
        def step(now: float) -> float:
            order.append((name, now))
            return now + period

        return step

    a = asyncio.create_task(run_steps(clock, every("a", 0.5), 0.0))
    b = asyncio.create_task(run_steps(clock, every("b", 0.75), 0.0))
    for _ in range(4):
        await settle()
        deadline = clock.next_deadline()
        assert deadline is not None
        clock.advance_to(deadline)
    await settle()
    a.cancel()
    b.cancel()
    await asyncio.gather(a, b, return_exceptions=True)
    # a tie goes to the one that went to sleep first: b slept towards 1.5 at 0.75, a only at 1.0
    assert order == [("a", 0.0), ("b", 0.0), ("a", 0.5), ("b", 0.75), ("a", 1.0), ("b", 1.5), ("a", 1.5)]


async def test_a_step_that_asks_for_no_time_does_not_starve_the_loop() -> None:
    clock = RealClock()
    steps = 0

    def greedy(now: float) -> float:
        nonlocal steps
        steps += 1
        if steps >= 1000:  # without a yield between passes it would spin here and hang the test
            raise LookupError("spun")
        return now  # due again at once, every time

    caller = asyncio.create_task(run_steps(clock, greedy, clock.now()))
    others = 0
    for _ in range(20):
        await asyncio.sleep(0)  # the loop still gets round to this task between passes
        others += 1
    caller.cancel()
    await asyncio.gather(caller, return_exceptions=True)
    assert others == 20 and 0 < steps <= 40


class _Steady:
    """A step due every 2 ms that counts its calls."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, now: float) -> float:
        self.steps += 1
        return now + 0.002

    async def still_stepping(self, caller: asyncio.Task[None]) -> None:
        """Assert the caller is alive and steps again (waiting up to 50 ms for it), then stop it."""
        before = self.steps
        for _ in range(50):
            await asyncio.sleep(0.001)
            if self.steps > before:
                break
        assert not caller.done() and self.steps > before  # the other caller still steps
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)


class _Halt(BaseException):
    """Not an Exception: what a step might raise that the stepper must still hand to its caller."""


@pytest.mark.parametrize("raised", [_Halt, asyncio.CancelledError])
async def test_a_step_raising_a_base_exception_ends_its_own_caller_and_no_other(raised: type[BaseException]) -> None:
    clock = RealClock()

    def bad(now: float) -> float:
        raise raised()

    good = _Steady()
    keeps = asyncio.create_task(run_steps(clock, good, clock.now()))
    await settle()
    failing = asyncio.create_task(run_steps(clock, bad, clock.now()))
    done, _ = await asyncio.wait([failing], timeout=1.0)  # a guard against the hang, not a timing check
    assert failing in done  # its caller is told, as a plain loop of sleeps would tell it
    assert failing.cancelled() if raised is asyncio.CancelledError else isinstance(failing.exception(), _Halt)
    await good.still_stepping(keeps)


async def test_a_step_returning_no_number_fails_its_own_caller_and_no_other() -> None:
    clock = RealClock()
    good = _Steady()
    keeps = asyncio.create_task(run_steps(clock, good, clock.now()))
    await settle()
    with pytest.raises((TypeError, ValueError)):
        await asyncio.wait_for(run_steps(clock, lambda now: "soon", clock.now()), 1.0)  # type: ignore[arg-type,return-value]
    for never in (math.inf, math.nan):  # no slot holds it: the loop's other steps would stop with it
        with pytest.raises(ValueError, match="a due time of"):
            await asyncio.wait_for(run_steps(clock, functools.partial(_always, never), clock.now()), 1.0)
        with pytest.raises(ValueError, match="the first step's due time takes a finite number"):
            await run_steps(clock, lambda now: now + 1.0, never)
    with pytest.raises(ValueError, match="further off than any clock reaches"):  # finite, but no slot number holds it
        await asyncio.wait_for(run_steps(clock, lambda now: 1e308, clock.now()), 1.0)
    with pytest.raises(ValueError, match="further off than any clock reaches"):
        await run_steps(clock, lambda now: now + 1.0, 1e308)

    def exhausted(now: float) -> float:
        return next(iter(()))  # an exhausted iterator read inside a step: a future refuses its StopIteration

    with pytest.raises(RuntimeError, match="a step raised StopIteration"):
        await asyncio.wait_for(run_steps(clock, exhausted, clock.now()), 1.0)
    assert _steppers[asyncio.get_running_loop()].callers == 1  # the good one alone
    await good.still_stepping(keeps)


@pytest.mark.parametrize("real", [True, False])
async def test_a_step_returning_none_ends_its_own_caller_and_no_other(real: bool) -> None:
    """``None`` means done: run_steps returns after exactly the steps asked for, the others go on."""
    clock: Clock = RealClock() if real else VirtualClock()
    calls: list[float] = []

    def three(now: float) -> float | None:
        calls.append(now)
        return None if len(calls) == 3 else now + 0.002

    if isinstance(clock, VirtualClock):
        ending = asyncio.create_task(run_steps(clock, three, 0.0))
        for _ in range(100):  # a guard against the hang
            await settle()
            if ending.done():
                break
            clock.advance(0.001)
        await ending
    else:
        good = _Steady()
        keeps = asyncio.create_task(run_steps(clock, good, clock.now()))
        await settle()
        await asyncio.wait_for(run_steps(clock, three, clock.now()), 1.0)  # a guard against the hang
        await good.still_stepping(keeps)
        assert _steppers[asyncio.get_running_loop()].callers == 0  # done and cancelled: neither counts any more
    assert len(calls) == 3
    assert all(b - a >= 0.002 - 1e-9 for a, b in zip(calls, calls[1:]))


async def test_a_caller_cancelled_by_an_earlier_step_of_the_same_pass_is_not_stepped_again() -> None:
    clock = RealClock()
    made: list[str] = []
    due = clock.now() + 0.005
    victim: asyncio.Task[None] | None = None

    def canceller(now: float) -> None:
        made.append("canceller")
        assert victim is not None
        victim.cancel()  # in the same pass as the victim's step, which comes next

    def cancelled(now: float) -> float:
        made.append("victim")
        return now + 0.002

    first = asyncio.create_task(run_steps(clock, canceller, due))
    await settle()
    victim = asyncio.create_task(run_steps(clock, cancelled, due))  # due with it, after it in the heap's order
    await asyncio.gather(first, victim, return_exceptions=True)
    assert made == ["canceller"] and victim.cancelled()


def test_a_closed_loop_with_a_timer_still_armed_is_not_kept_alive() -> None:
    import gc
    import weakref

    from voxline.base import clock as clock_module
    from voxline.base import steps as steps_module

    async def leave_a_sleeper_behind() -> None:
        clock = RealClock()
        asyncio.ensure_future(clock.sleep(60.0))  # asyncio.run cancels it; its slot's timer never fires
        stepping = asyncio.ensure_future(run_steps(clock, lambda now: now + 60.0, clock.now() + 60.0))
        await settle()
        assert not stepping.done()

    loops = []
    for _ in range(3):
        runner = asyncio.Runner()
        loops.append(weakref.ref(runner.get_loop()))
        runner.run(leave_a_sleeper_behind())
        runner.close()
    asyncio.run(RealClock().sleep(0.001))  # a new loop's first sleep is where the closed ones are let go of
    gc.collect()
    assert [ref() for ref in loops] == [None, None, None]
    assert all(not loop.is_closed() for loop in list(clock_module._timers) + list(steps_module._steppers))


def _always(value: float, now: float) -> float:
    """A step that is always due at ``value``."""
    return value
