"""An event loop whose idle moments advance a :class:`~voxline.base.clock.VirtualClock`.

``voxline replay --fast`` runs the very :class:`~voxline.session.VoiceSession` that
applications run, on a virtual clock, as fast as the CPU allows. The loop knows exactly
when every task is waiting: that is when it would block in its selector. At that moment
:class:`LockstepLoop` moves the clock to its next deadline, which wakes the sleepers in
deadline order, instead of blocking. Work handed to threads (tools, ``asyncio.to_thread``)
is waited for in real time first, so a blocking tool finishes before virtual time moves
on. Sockets still work (they are polled before time moves), but a peer that runs in real
time does not belong here: use the real clock for that.

::

    clock = VirtualClock()
    result = run_lockstep(replay(...), clock)
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar, TypeVarTuple

from voxline.base.clock import VirtualClock

__all__ = ["LockstepLoop", "run_lockstep"]

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
        return self._inner.select(timeout)


class LockstepLoop(asyncio.SelectorEventLoop):
    """A selector event loop that advances ``clock`` whenever nothing is ready to run."""

    def __init__(self, clock: VirtualClock) -> None:
        selector = _IdleSelector(selectors.DefaultSelector())
        super().__init__(selector)
        selector.loop = self
        self.clock = clock
        self._jobs = 0  # executor jobs in flight: time waits for them

    def run_in_executor(self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._jobs += 1
        future.add_done_callback(self._job_done)
        return future

    def _job_done(self, _future: asyncio.Future[Any]) -> None:
        self._jobs -= 1

    def advance_when_idle(self) -> bool:
        """Move the clock to its next deadline unless threads are still working; True if moved."""
        if self._jobs:
            return False
        deadline = self.clock.next_deadline()
        if deadline is None:
            return False
        self.clock.advance_to(deadline)
        return True


def run_lockstep(main: Coroutine[Any, Any, T], clock: VirtualClock) -> T:
    """Run ``main`` to completion on a :class:`LockstepLoop` over ``clock`` (from synchronous code)."""
    with asyncio.Runner(loop_factory=lambda: LockstepLoop(clock)) as runner:
        return runner.run(main)
