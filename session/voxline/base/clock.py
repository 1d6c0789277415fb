"""The one source of time for every layer: a clock protocol, a real clock and a virtual one.

Nothing else in voxline reads time. Times are seconds on a monotonic timeline;
:meth:`Clock.wall` gives the Unix time at ``now()`` for the few things that carry a date
(``expires_at`` of a session or a client secret).

* :class:`RealClock` follows the running event loop (``loop.time()``). Its sleepers share
  timers: every deadline within the same millisecond of one loop waits on one loop timer
  (:class:`_SharedTimers`), so a thousand sessions pacing 20 ms blocks cost the loop a
  few timers per block, not a thousand.
* :func:`run_steps` calls a synchronous step at the times it asks for (an output reading a
  block every 20 ms). On a :class:`RealClock` the steps of every caller on one loop are
  made by one loop callback per slot (:class:`_Stepper`): a millisecond, or 4 ms once the loop
  steps more than 16 callers (:data:`GATHER_S`). A thousand outputs cost the loop one wake-up
  per slot, not a thousand task switches.
* :class:`VirtualClock` stands still until told to move: :meth:`VirtualClock.advance` and
  :meth:`VirtualClock.advance_to` wake every sleeper whose deadline has been reached, in
  deadline order (ties in the order they went to sleep). A lockstep driver jumps straight
  to :meth:`VirtualClock.next_deadline`, lets the woken tasks run, and repeats.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .arguments import real

__all__ = ["Clock", "RealClock", "Step", "VirtualClock", "forget_closed_loops", "loop_table", "run_steps"]


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds and a way to wait on them."""

    def now(self) -> float: ...

    def wall(self) -> float:
        """Unix seconds at :meth:`now`."""
        ...

    async def sleep_until(self, t: float) -> None: ...

    async def sleep(self, dt: float) -> None: ...


class RealClock:
    """Event-loop time. Outside a running loop (e.g. on an audio thread) ``now()`` is
    ``time.monotonic()``, the clock asyncio's default loop uses."""

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep_until(self, t: float) -> None:
        """Return once ``now() >= t``, at most about a millisecond later; always yields to the loop at least once."""
        loop = asyncio.get_running_loop()
        if t <= loop.time():
            await asyncio.sleep(0)
            return
        timers = _timers_of(loop)
        while t > loop.time():
            await timers.wait(loop, t)

    async def sleep(self, dt: float) -> None:
        await self.sleep_until(self.now() + dt)


TIMER_SLOT_S = 0.001
"""Deadlines of :class:`RealClock` sleepers are rounded up to this grid and share a timer per slot."""

GATHER_S = 0.004
"""The coarser grid a loop's steps (:func:`run_steps`) wake on while the loop steps more than :data:`GATHER_FROM`
callers: one wake-up makes every step due within the same 4 ms, each at most 4 ms late, instead of one
wake-up per millisecond in which some caller is due. Many sessions on one loop spend much of their time
waking; a few keep their steps within a millisecond."""

GATHER_FROM = 16
"""How many callers a loop's stepper takes on the millisecond grid: with more it wakes on :data:`GATHER_S`'s."""


class _SharedTimers:
    """The sleepers of one event loop, by slot: one loop timer wakes every sleeper of a slot.

    A sleeper gets a future of its own (cancelling one sleeper touches no other); a slot's
    timer resolves every future still waiting, in the order they went to sleep.
    """

    def __init__(self) -> None:  # holds no reference to its loop: the loop keys it weakly
        self._slots: dict[int, list[asyncio.Future[None]]] = {}

    def wait(self, loop: asyncio.AbstractEventLoop, t: float) -> asyncio.Future[None]:
        slot = _slot(t)
        future = loop.create_future()
        waiters = self._slots.get(slot)
        if waiters is None:
            self._slots[slot] = [future]
            loop.call_at(slot * TIMER_SLOT_S, self._fire, slot)
        else:
            waiters.append(future)
        return future

    @property
    def pending(self) -> int:
        """Slots with a loop timer armed."""
        return len(self._slots)

    def _fire(self, slot: int) -> None:
        for future in self._slots.pop(slot, ()):
            if not future.done():
                future.set_result(None)


def _slot(t: float, width: float = TIMER_SLOT_S) -> int:
    """The slot of a grid of ``width`` seconds a deadline wakes in: the first grid time not before it."""
    slot = math.ceil(t / width)
    if slot * width < t:  # a rounding below t would wake early, only to sleep again
        slot += 1
    return slot


_loop_tables: list[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]] = []


def loop_table() -> weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]:
    """A table of one entry per event loop, keyed weakly; create entries after :func:`forget_closed_loops`."""
    table: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
    _loop_tables.append(table)
    return table


_timers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _SharedTimers] = loop_table()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _SharedTimers] | None = None  # the loop asked for last


def _timers_of(loop: asyncio.AbstractEventLoop) -> _SharedTimers:
    global _last
    if _last is not None and _last[0]() is loop:
        return _last[1]
    timers = _timers.get(loop)
    if timers is None:
        forget_closed_loops()
        timers = _timers[loop] = _SharedTimers()
    _last = (weakref.ref(loop), timers)
    return timers


Step = Callable[[float], "float | None"]
"""Called with ``now`` at its due time; returns the next due time (later than ``now``), or
``None`` once it has nothing more to do."""


async def run_steps(clock: Clock, step: Step, first: float) -> None:
    """Call ``step`` at ``first`` and then at every time it returns, until it returns ``None``.

    An exception from ``step`` ends this call with it; so does a cancel. On a :class:`RealClock` one callback
    per event loop makes the steps of every caller (:class:`_Stepper`), at the millisecond slots
    their own sleeps would have woken at, or on a 4 ms grid while the loop steps many callers
    (:data:`GATHER_S`); never before a step is due. On any other clock this is a plain loop of
    :meth:`Clock.sleep_until`, so a :class:`VirtualClock` orders them as it orders sleepers.
    """
    if isinstance(clock, RealClock):
        loop = asyncio.get_running_loop()
        stepper = _steppers.get(loop)
        if stepper is None:
            forget_closed_loops()
            stepper = _steppers[loop] = _Stepper()
        await stepper.join(loop, step, first)
        return
    due: float | None = first
    while due is not None:
        await clock.sleep_until(due)
        due = step(clock.now())


class _Stepper:
    """The steps of one event loop, by due time, made by one loop callback per slot of :attr:`grid`.

    No task of its own: the callback runs the steps that are due, then arms one loop timer for
    the earliest step left, at the first slot not before it.
    """

    def __init__(self) -> None:  # holds no reference to its loop: the loop keys it weakly
        self._heap: list[list[Any]] = []  # [due, order, step or None once gone, the caller's future]
        self._order = itertools.count()
        self._timer: asyncio.Handle | None = None
        self._timer_at = math.inf  # when the armed callback runs (-inf: in the next pass)
        self.callers = 0  # joined and not yet done

    async def join(self, loop: asyncio.AbstractEventLoop, step: Step, first: float) -> None:
        _due_time(real(first, "the first step's due time"))  # a time no slot holds would stop every caller of the loop
        done: asyncio.Future[None] = loop.create_future()
        entry: list[Any] = [first, next(self._order), step, done]
        self.callers += 1
        try:
            heapq.heappush(self._heap, entry)
            self._arm(loop)
            await done  # ends when the step is done, with its exception, or with a cancel
        finally:
            entry[2] = None
            self.callers -= 1

    @property
    def grid(self) -> float:
        """The width of the slots the stepper wakes in now (see :data:`GATHER_S`)."""
        return GATHER_S if self.callers > GATHER_FROM else TIMER_SLOT_S

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """A callback for the earliest step, unless one is armed at least as early."""
        heap = self._heap
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
        if not heap:
            if self._timer is not None:
                self._timer.cancel()
                self._timer, self._timer_at = None, math.inf
            return
        due = heap[0][0]
        width = self.grid
        at = -math.inf if due <= loop.time() else _slot(due, width) * width
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        if at == -math.inf:  # due already: in the next pass, after what is ready now
            timer = loop.call_soon(self._run, loop)
        else:
            timer = loop.call_at(at, self._run, loop)
        self._timer, self._timer_at = timer, at

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._timer_at = None, math.inf
        heap, now, stepped = self._heap, loop.time(), []
        try:
            while heap and heap[0][0] <= now:
                entry = heapq.heappop(heap)
                if entry[2] is None or entry[3].done():  # gone, or its caller cancelled earlier in this pass
                    continue
                try:
                    due = entry[2](now)
                    if due is None:  # the step is done
                        entry[2] = None
                        if not entry[3].done():  # (the step may have cancelled its own caller)
                            entry[3].set_result(None)
                        continue
                    entry[0] = _due_time(float(due))  # a due time that is no number is the caller's error
                except BaseException as exc:  # the caller's, to raise from its join(), whatever it is
                    entry[2] = None
                    if entry[3].done():
                        continue
                    if isinstance(exc, StopIteration):  # a future refuses it (it would end a generator instead)
                        failure = RuntimeError("a step raised StopIteration")
                        failure.__cause__ = exc
                        entry[3].set_exception(failure)
                    else:
                        entry[3].set_exception(exc)
                    continue
                stepped.append(entry)
        finally:  # after the pass (a step due again at once waits for the next one), whatever happened in it
            for entry in stepped:
                heapq.heappush(heap, entry)
            self._arm(loop)


def _due_time(due: float) -> float:
    """``due`` if a slot holds it; a ValueError for a time that would never come round (it would hold up the
    steps after it)."""
    if not math.isfinite(due):
        raise ValueError(f"a step asked for a due time of {due}")
    try:
        _slot(due)
    except OverflowError:
        raise ValueError(f"a step asked for a due time of {due}, further off than any clock reaches") from None
    return due


_steppers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Stepper] = loop_table()


def forget_closed_loops() -> None:
    """Drop the entries of closed loops from every :func:`loop_table` (the timers, the steppers, …).

    The tables are keyed weakly, but a loop closed with a slot still armed (a sleeper cancelled
    at shutdown) is held by that slot's futures, so its entry would never go; a new loop's first
    use clears them.
    """
    global _last
    for table in _loop_tables:
        for loop in [loop for loop in table if loop.is_closed()]:
            del table[loop]
    last_loop = _last[0]() if _last is not None else None
    if last_loop is None or last_loop.is_closed():
        _last = None


class VirtualClock:
    """Time that advances only through :meth:`advance` / :meth:`advance_to`."""

    def __init__(self, start: float = 0.0, *, wall_start: float = 1_767_225_600.0) -> None:
        self._now = real(start, "start")
        real(wall_start, "wall_start")
        self._wall_offset = wall_start - start  # a fixed date (2026-01-01) keeps runs reproducible
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep_until(self, t: float) -> None:
        """Wait until the clock is advanced to ``t`` or beyond; a past ``t`` yields once."""
        if t != t:  # NaN: no advance ever reaches it, and it would unsort the sleepers
            raise ValueError("sleep_until takes a time, not nan")
        if t <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (t, next(self._order), future))
        await future

    async def sleep(self, dt: float) -> None:
        await self.sleep_until(self._now + dt)

    def next_deadline(self) -> float | None:
        """The earliest deadline anyone is still sleeping towards, or None."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    def advance(self, dt: float) -> None:
        if real(dt, "advance") < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {dt})")
        self.advance_to(self._now + dt)

    def advance_to(self, t: float) -> None:
        """Move to ``t`` and wake, in deadline order, every sleeper whose deadline is ``<= t``."""
        if real(t, "advance_to") < self._now:
            raise ValueError(f"a clock cannot go backwards ({t} < {self._now})")
        self._now = t
        while self._sleepers and self._sleepers[0][0] <= t:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
