"""The one source of time for every layer: a clock protocol, a real clock and a virtual one.

Nothing else in voxline reads time. Times are seconds on a monotonic timeline;
:meth:`Clock.wall` gives the Unix time at ``now()`` for the few things that carry a date
(``expires_at`` of a session or a client secret).

* :class:`RealClock` follows the running event loop (``loop.time()``).
* :class:`VirtualClock` stands still until told to move: :meth:`VirtualClock.advance` and
  :meth:`VirtualClock.advance_to` wake every sleeper whose deadline has been reached, in
  deadline order (ties in the order they went to sleep). A lockstep driver jumps straight
  to :meth:`VirtualClock.next_deadline`, lets the woken tasks run, and repeats.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "VirtualClock"]


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
        """Return once ``now() >= t``; always yields to the loop at least once."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, t - loop.time()))
        while (remaining := t - loop.time()) > 0:
            await asyncio.sleep(remaining)

    async def sleep(self, dt: float) -> None:
        await self.sleep_until(self.now() + dt)


class VirtualClock:
    """Time that advances only through :meth:`advance` / :meth:`advance_to`."""

    def __init__(self, start: float = 0.0, *, wall_start: float = 1_767_225_600.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start  # a fixed date (2026-01-01) keeps runs reproducible
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep_until(self, t: float) -> None:
        """Wait until the clock is advanced to ``t`` or beyond; a past ``t`` yields once."""
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
        if dt < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {dt})")
        self.advance_to(self._now + dt)

    def advance_to(self, t: float) -> None:
        """Move to ``t`` and wake, in deadline order, every sleeper whose deadline is ``<= t``."""
        if t < self._now:
            raise ValueError(f"a clock cannot go backwards ({t} < {self._now})")
        self._now = t
        while self._sleepers and self._sleepers[0][0] <= t:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
