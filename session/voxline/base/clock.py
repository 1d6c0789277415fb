"""The one source of time for every layer: a clock protocol, a real clock and a virtual one.

Nothing else in voxline reads time. Times are seconds on a monotonic timeline;
:meth:`Clock.wall` gives the Unix time at ``now()`` for the few things that carry a date
(``expires_at`` of a session or a client secret).

* :class:`RealClock` is ``time.monotonic()``, which asyncio's own loops keep as ``loop.time()``. Its sleepers share
  timers: every deadline within the same millisecond of one loop waits on one loop timer
  (:class:`_SharedTimers`), so a thousand sessions pacing 20 ms blocks cost the loop a
  few timers per block, not a thousand.
* :mod:`voxline.base.steps` makes synchronous steps at the times they ask for, on either clock.
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
from typing import Any, Protocol, runtime_checkable

from .arguments import real

__all__ = ["TIMER_SLOT_S", "Clock", "RealClock", "VirtualClock", "forget_closed_loops", "loop_table", "wait_within"]


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
    """Monotonic time, ``time.monotonic()``: the clock asyncio's own event loops keep as
    ``loop.time()`` (and an audio thread can read it as well).

    ``now()`` reads it directly rather than asking the running loop for its time: asking which
    loop runs costs a system call each time on Python 3.11 (asyncio checks the process id), and
    sessions read the clock several times per block of audio. A loop whose ``time()`` is another
    clock (uvloop's is ``time.monotonic()`` in whole milliseconds, read once a pass) wakes sleepers
    up to that much later than asked."""

    def now(self) -> float:
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
        await self.waiter(t)

    def waiter(self, t: float) -> asyncio.Future[None]:
        """A future resolved once the clock is advanced to ``t`` (what :meth:`sleep_until` awaits); at once
        for a ``t`` already reached."""
        if t != t:
            raise ValueError("waiter takes a time, not nan")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if t <= self._now:
            future.set_result(None)
        else:
            heapq.heappush(self._sleepers, (t, next(self._order), future))
        return future

    def bring_forward(self, waiter: asyncio.Future[None], t: float) -> None:
        """Resolve ``waiter`` (from :meth:`waiter`) once the clock reaches ``t``, if that comes sooner; at once
        if ``t`` has been reached. Its later deadline is then dropped as it comes up."""
        if t != t:
            raise ValueError("bring_forward takes a time, not nan")
        if waiter.done():
            return
        if t <= self._now:
            waiter.set_result(None)
        else:
            heapq.heappush(self._sleepers, (t, next(self._order), waiter))

    async def sleep(self, dt: float) -> None:
        await self.sleep_until(self._now + dt)

    def holds(self, future: asyncio.Future[Any]) -> bool:
        """``future`` is one of this clock's sleepers, still waiting (a task awaiting it waits on this clock)."""
        return not future.done() and any(waiter is future for _t, _n, waiter in self._sleepers)

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


async def wait_within(clock: Clock, seconds: float, work: asyncio.Future[Any]) -> bool:
    """Wait for ``work`` at most ``seconds`` of ``clock``'s time; True if it is done. ``work`` is left as it is
    either way (the caller cancels, abandons or keeps it), and so it is if this wait is cancelled."""
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return work.done()
