"""Steps made at the times they ask for: one callback per event loop for every caller on a real clock.

:func:`run_steps` calls a synchronous step at the times it asks for (an output reading a block
every 20 ms, a recording handing over its blocks). On a :class:`~voxline.base.clock.RealClock`
the steps of every caller on one loop are made by one loop callback per slot (:class:`_Stepper`):
a millisecond, or 4 ms once the loop steps more than 16 callers (:data:`GATHER_S`). A thousand
outputs cost the loop one wake-up per slot, not a thousand task switches. On a
:class:`~voxline.base.clock.VirtualClock` each caller sleeps from step to step, so the clock
orders steps as it orders every sleeper. An :class:`Alarm` brings a caller's next step forward.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import weakref
from collections.abc import Callable
from typing import Any

from .arguments import real
from .clock import TIMER_SLOT_S, Clock, RealClock, VirtualClock, _slot, forget_closed_loops, loop_table

__all__ = ["GATHER_FROM", "GATHER_S", "Alarm", "Step", "run_steps"]

GATHER_S = 0.004
"""The coarser grid a loop's steps (:func:`run_steps`) wake on while the loop steps more than :data:`GATHER_FROM`
callers: one wake-up makes every step due within the same 4 ms, each at most 4 ms late, instead of one
wake-up per millisecond in which some caller is due. Many sessions on one loop spend much of their time
waking; a few keep their steps within a millisecond."""

GATHER_FROM = 16
"""How many callers a loop's stepper takes on the millisecond grid: with more it wakes on :data:`GATHER_S`'s."""


Step = Callable[[float], "float | None"]
"""Called with ``now`` at its due time; returns the next due time (later than ``now``), or
``None`` once it has nothing more to do."""


async def run_steps(clock: Clock, step: Step, first: float, alarm: Alarm | None = None) -> None:
    """Call ``step`` at ``first`` and then at every time it returns, until it returns ``None``.

    An exception from ``step`` ends this call with it; so does a cancel. On a :class:`RealClock` one callback
    per event loop makes the steps of every caller (:class:`_Stepper`), at the millisecond slots
    their own sleeps would have woken at, or on a 4 ms grid while the loop steps many callers
    (:data:`GATHER_S`); never before a step is due. On any other clock this is a plain loop of
    :meth:`Clock.sleep_until`, so a :class:`VirtualClock` orders them as it orders sleepers.

    With ``alarm``, :meth:`Alarm.ring` brings the next step forward while this waits for it (on a
    :class:`RealClock` or a :class:`VirtualClock`; see :attr:`Alarm.armed`).
    """
    if alarm is not None and alarm._bound:
        raise ValueError("an Alarm serves one run_steps at a time")
    if isinstance(clock, RealClock):
        loop = asyncio.get_running_loop()
        stepper = _steppers.get(loop)
        if stepper is None:
            forget_closed_loops()
            stepper = _steppers[loop] = _Stepper()
        await stepper.join(loop, step, first, alarm)
        return
    if alarm is not None and isinstance(clock, VirtualClock):
        await alarm._virtual(clock, step, first)
        return
    due: float | None = first
    while due is not None:
        await clock.sleep_until(due)
        due = step(clock.now())


class Alarm:
    """Brings the next step of one :func:`run_steps` call forward.

    A caller whose steps may sleep long (an output with nothing to play) passes one to
    :func:`run_steps`; whatever needs a step sooner calls :meth:`ring`. Plain and synchronous; made
    for the event loop's thread.
    """

    __slots__ = ("_bound", "_entry", "_loop", "_stepper", "_clock", "_waiter")

    def __init__(self) -> None:
        self._bound = False
        self._entry: list[Any] | None = None  # on a RealClock: the caller's entry in its loop's stepper
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stepper: _Stepper | None = None
        self._clock: VirtualClock | None = None  # on a VirtualClock: the clock, and the wait for the next step
        self._waiter: asyncio.Future[None] | None = None

    @property
    def armed(self) -> bool:
        """True while a :func:`run_steps` call on a clock that can bring steps forward holds it."""
        return self._entry is not None or self._clock is not None

    def ring(self, at: float) -> None:
        """The next step no later than ``at`` (at once if that has passed); nothing if it is due by then
        already, or if no call holds the alarm."""
        if at != at:
            raise ValueError("ring takes a time, not nan")
        entry, stepper = self._entry, self._stepper
        if entry is not None and stepper is not None and self._loop is not None:
            stepper.bring_forward(self._loop, self, entry, at)
        elif self._clock is not None and self._waiter is not None:
            self._clock.bring_forward(self._waiter, at)

    async def _virtual(self, clock: VirtualClock, step: Step, first: float) -> None:
        self._bound, self._clock = True, clock
        try:
            due: float | None = first
            while due is not None:
                waiter = self._waiter = clock.waiter(due)
                if waiter.done():
                    await asyncio.sleep(0)  # due already: yield once, as sleep_until does
                else:
                    await waiter
                self._waiter = None
                due = step(clock.now())
        finally:
            self._bound, self._clock, self._waiter = False, None, None


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
        self._stepped: list[list[Any]] | None = None  # during a pass: the entries to push back after it
        self._current: list[Any] | None = None  # the entry whose step is running

    async def join(self, loop: asyncio.AbstractEventLoop, step: Step, first: float, alarm: Alarm | None = None) -> None:
        _due_time(real(first, "the first step's due time"))  # a time no slot holds would stop every caller of the loop
        done: asyncio.Future[None] = loop.create_future()
        entry: list[Any] = [first, next(self._order), step, done]
        self.callers += 1
        if alarm is not None:
            alarm._bound, alarm._entry, alarm._loop, alarm._stepper = True, entry, loop, self
        try:
            heapq.heappush(self._heap, entry)
            self._arm(loop)
            await done  # ends when the step is done, with its exception, or with a cancel
        finally:
            if alarm is not None:
                entry = alarm._entry or entry  # the entry a ring put in its place
                alarm._bound, alarm._entry, alarm._loop, alarm._stepper = False, None, None, None
            entry[2] = None
            self.callers -= 1

    def bring_forward(self, loop: asyncio.AbstractEventLoop, alarm: Alarm, entry: list[Any], at: float) -> None:
        """``entry``'s step at ``at`` if that is sooner: a fresh entry takes its place (a heap keeps no
        order for a key changed in place), and the old one is gone."""
        if entry[2] is None or entry[3].done() or entry[0] <= at or entry is self._current:
            return  # gone, due by then already, or being stepped (the time it returns stands)
        fresh = [at, next(self._order), entry[2], entry[3]]
        entry[2] = None
        alarm._entry = fresh
        if self._stepped is not None:  # rung in a pass: in the next one, like a step due again at once
            self._stepped.append(fresh)
            return
        heapq.heappush(self._heap, fresh)
        self._arm(loop)

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
        heap, now = self._heap, loop.time()
        stepped: list[list[Any]] = []
        self._stepped = stepped
        try:
            while heap and heap[0][0] <= now:
                entry = heapq.heappop(heap)
                if entry[2] is None or entry[3].done():  # gone, or its caller cancelled earlier in this pass
                    continue
                try:
                    self._current = entry
                    try:
                        due = entry[2](now)
                    finally:
                        self._current = None
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
            self._stepped = None
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
