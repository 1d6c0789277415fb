"""An event loop whose idle moments advance a :class:`~voxline.base.clock.VirtualClock`.

``voxline replay --fast`` runs the very :class:`~voxline.session.VoiceSession` that
applications run, on a virtual clock, as fast as the CPU allows. The loop knows exactly
when every task is waiting: that is when it would block in its selector. At that moment
:class:`LockstepLoop` moves the clock to its next deadline, which wakes the sleepers in
deadline order, instead of blocking. Work handed to threads (``asyncio.to_thread``, the
local server's speech) is waited for in real time first, so it finishes before virtual time
moves on. A blocking *tool* is the exception (:func:`follows_real_time`): the session's
time stands still while it works for up to :data:`GRACE_S` of real time (a quick tool
changes nothing, and runs are the same every time), then follows real time, so a tool that
is stuck reaches its timeout on the session's clock as it would in real time, at the same
virtual instant. So does the thread work an async tool starts (``asyncio.to_thread``, an HTTP
client's DNS lookup: the tool is awaited under :func:`follows_real_time` too), and so does an
async tool while its session waits for its answer and it waits on something other than the
session's clock (:func:`waiting_for_tool`): a reply from a real service on a socket, a timer of
the loop, come in real time. A tool that waits on the session's own clock (a simulated latency)
holds nothing: time moves to its deadline at once. A tool given up on (its timeout, a close)
holds nothing any more, even one that ignores its cancel. Other work on the loop is not held
for: sockets are polled before time moves, but a peer that runs in real time does not belong
here: use the real clock for that.

Several sessions may share one loop, each on a clock of its own (:meth:`LockstepLoop.own_clock`,
a replay farm): every idle moment moves each clock to its next deadline, and a thread working
for one session holds up that session's clock only.

::

    clock = VirtualClock()
    result = run_lockstep(replay(...), clock)
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import Any, TypeVar, TypeVarTuple

from voxline.base.clock import VirtualClock
from voxline.base.loop_runner import bounded_runner

__all__ = ["GRACE_S", "LockstepLoop", "follows_real_time", "run_lockstep", "waiting_for_tool"]

GRACE_S = 0.25
"""Real seconds a blocking tool may work while its session's time stands still; past them the
session's time follows real time (a tool's timeout should be longer than this)."""

_CLOCK: ContextVar[VirtualClock | None] = ContextVar("voxline_lockstep_clock", default=None)
_REAL_TIME: ContextVar[bool] = ContextVar("voxline_lockstep_real_time", default=False)


@contextlib.contextmanager
def follows_real_time() -> Iterator[None]:
    """Executor jobs started in this block are paced work (a blocking tool): past :data:`GRACE_S`,
    the session's clock follows real time while they run instead of waiting for them."""
    token = _REAL_TIME.set(True)
    try:
        yield
    finally:
        # a coroutine abandoned with its loop (a tool that ignored its cancel) is closed when it is
        # collected, outside the context it ran in: there is nothing left to reset then
        with contextlib.suppress(ValueError):
            _REAL_TIME.reset(token)


@contextlib.contextmanager
def waiting_for_tool(work: asyncio.Future[Any]) -> Iterator[None]:
    """On a :class:`LockstepLoop`, while a session waits in this block for a tool's task ``work`` to answer: while
    that task waits on something other than its session's clock (a socket, a timer of the loop: what comes in real
    time), a paced job of the clock, which stands still for :data:`GRACE_S` of real time, then follows real time;
    while it waits on the clock itself (a simulated latency), nothing holds the clock. Elsewhere nothing."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if not isinstance(loop, LockstepLoop):
        yield
        return
    wait = loop.tool_wait_started(work)
    try:
        yield
    finally:
        loop.tool_wait_done(wait)


class _ToolWait:
    """A tool's task its session waits for, and since when (real, and on the clock) it waits on real time."""

    __slots__ = ("clock", "real_start", "task", "virtual_start")

    def __init__(self, clock: VirtualClock, task: asyncio.Future[Any]) -> None:
        self.clock, self.task = clock, task
        self.real_start: float | None = None  # None: it waits on its clock, or runs
        self.virtual_start = 0.0

    def horizon(self, real_now: float) -> float | None:
        """How far its clock may move now (None: anywhere): as a paced job's while the task waits on real time."""
        waiting_on = getattr(self.task, "_fut_waiter", None)  # what the task awaits (CPython's tasks keep it)
        if waiting_on is None or self.clock.holds(waiting_on):
            self.real_start = None
            return None
        if self.real_start is None:
            self.real_start, self.virtual_start = real_now, self.clock.now()
        return _paced_horizon(self.virtual_start, self.real_start, real_now)

    def real_wait(self, deadline: float, real_now: float) -> float:
        """Real seconds until ``deadline`` falls within the horizon (after :meth:`horizon`)."""
        assert self.real_start is not None
        return _paced_wait(deadline, self.virtual_start, self.real_start, real_now)


def _paced_horizon(virtual_start: float, real_start: float, real_now: float) -> float:
    """How far a clock with paced work since ``real_start`` (at ``virtual_start`` on it) may move: nowhere for
    :data:`GRACE_S`, then as far as real time went."""
    elapsed = real_now - real_start
    return virtual_start + elapsed if elapsed >= GRACE_S else virtual_start


def _paced_wait(deadline: float, virtual_start: float, real_start: float, real_now: float) -> float:
    """Real seconds until ``deadline`` falls within :func:`_paced_horizon`."""
    return max(GRACE_S, deadline - virtual_start) - (real_now - real_start)


class _Jobs:
    """The thread jobs one clock waits on: held ones stop it, paced ones let it follow real time."""

    __slots__ = ("held", "paced", "real_start", "virtual_start")

    def __init__(self, clock: VirtualClock) -> None:
        self.held = self.paced = 0
        self.real_start, self.virtual_start = time.monotonic(), clock.now()

    def horizon(self, real_now: float) -> float | None:
        """How far the clock may move now (None: anywhere)."""
        if self.held:
            return self.virtual_start
        if not self.paced:
            return None
        return _paced_horizon(self.virtual_start, self.real_start, real_now)

    def real_wait(self, deadline: float, real_now: float) -> float | None:
        """Real seconds until ``deadline`` falls within the horizon (None: only a job's end will do)."""
        if self.held:
            return None
        return _paced_wait(deadline, self.virtual_start, self.real_start, real_now)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class _IdleSelector(selectors.BaseSelector):
    """The loop's selector; when the loop would wait, it asks ``loop`` to move time instead."""

    def __init__(self, inner: selectors.BaseSelector) -> None:
        self._inner = inner
        self.loop: LockstepLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return self._inner.select(0)
        ready = self._inner.select(0)
        if ready or (self.loop is not None and self.loop.advance_when_idle()):
            return ready
        wait = self.loop.real_wait if self.loop is not None else None
        if wait is not None:
            timeout = wait if timeout is None else min(timeout, wait)
        return self._inner.select(timeout)


class LockstepLoop(asyncio.SelectorEventLoop):
    """A selector event loop that advances ``clock`` whenever nothing is ready to run."""

    def __init__(self, clock: VirtualClock) -> None:
        selector = _IdleSelector(selectors.DefaultSelector())
        super().__init__(selector)
        selector.loop = self
        self.clock = clock
        self._clocks: list[VirtualClock] = [clock]
        self._jobs: dict[VirtualClock, _Jobs] = {}  # executor jobs in flight, by the clock that waits for them
        self.real_wait: float | None = None  # how long the selector may block before a paced clock may move
        self._tool_waits: list[_ToolWait] = []  # tools sessions wait for (few: one per call running)

    @contextlib.contextmanager
    def own_clock(self) -> Iterator[VirtualClock]:
        """A clock of its own, at 0, for the tasks created in this block (and their thread jobs):
        moved by this loop alongside the others, held up only by its own jobs."""
        clock = VirtualClock()
        self._clocks.append(clock)
        token = _CLOCK.set(clock)
        try:
            yield clock
        finally:
            _CLOCK.reset(token)
            self._clocks.remove(clock)

    def run_in_executor(self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        clock, paced = _CLOCK.get() or self.clock, _REAL_TIME.get()
        jobs = self._jobs.get(clock)
        if jobs is None:
            jobs = self._jobs[clock] = _Jobs(clock)
        if paced:
            jobs.paced += 1
        else:
            jobs.held += 1
        future.add_done_callback(lambda _f: self._job_done(clock, paced))
        return future

    def tool_wait_started(self, work: asyncio.Future[Any]) -> _ToolWait:
        """The current task's session waits for the tool task ``work`` (see :func:`waiting_for_tool`)."""
        wait = _ToolWait(_CLOCK.get() or self.clock, work)
        self._tool_waits.append(wait)
        return wait

    def tool_wait_done(self, wait: _ToolWait) -> None:
        self._tool_waits.remove(wait)

    def _job_done(self, clock: VirtualClock, paced: bool) -> None:
        jobs = self._jobs[clock]
        if paced:
            jobs.paced -= 1
        else:
            jobs.held -= 1
        if not jobs.held and not jobs.paced:
            del self._jobs[clock]

    def advance_when_idle(self) -> bool:
        """Move every clock to its next deadline unless its threads keep it; True if any moved.

        :attr:`real_wait` is then how long the selector may block before a clock following a
        paced job may move (None: until something happens)."""
        moved, wait, real_now = False, None, time.monotonic()
        for clock in self._clocks:
            deadline = clock.next_deadline()
            if deadline is None:
                continue
            jobs = self._jobs.get(clock)
            horizon = jobs.horizon(real_now) if jobs is not None else None
            if jobs is not None and horizon is not None and deadline > horizon:
                need = jobs.real_wait(deadline, real_now)
                if need is not None:
                    wait = need if wait is None else min(wait, need)
                continue
            tools = [(w, h) for w in self._tool_waits if w.clock is clock and (h := w.horizon(real_now)) is not None]
            if any(deadline > h for _w, h in tools):
                need = min(w.real_wait(deadline, real_now) for w, h in tools if deadline > h)
                wait = need if wait is None else min(wait, need)
                continue
            clock.advance_to(deadline)
            moved = True
        self.real_wait = None if wait is None else max(0.0, wait)
        return moved


def run_lockstep(main: Coroutine[Any, Any, T], clock: VirtualClock) -> T:
    """Run ``main`` to completion on a :class:`LockstepLoop` over ``clock`` (from synchronous code). Tasks still
    running then (a tool that ignores its cancel) are waited for at most a few seconds of real time
    (:func:`~voxline.base.loop_runner.bounded_runner`)."""
    with bounded_runner(lambda: LockstepLoop(clock)) as runner:
        return runner.run(main)
