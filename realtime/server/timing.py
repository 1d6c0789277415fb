"""The clock the local server reads: ``now()`` and ``async sleep(dt)``, nothing else.

Any object with these two methods will do: ``voxline.base.clock.RealClock`` (the default)
or ``voxline.base.clock.VirtualClock`` in lockstep tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

__all__ = ["ClockLike", "first_of"]


@runtime_checkable
class ClockLike(Protocol):
    """Seconds on some monotonic timeline, and a way to wait on it."""

    def now(self) -> float: ...

    async def sleep(self, dt: float) -> None: ...


async def first_of(*waits: Awaitable[Any]) -> None:
    """Wait for the first of ``waits`` (e.g. a sleep and a wake-up); cancel and reap the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
