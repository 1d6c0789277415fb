"""The clock the local server reads: ``now()`` and ``async sleep(dt)``, nothing else.

Any object with these two methods will do: ``audio.clock.RealClock`` (the default)
or ``audio.clock.VirtualClock`` in lockstep tests.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["ClockLike"]


@runtime_checkable
class ClockLike(Protocol):
    """Seconds on some monotonic timeline, and a way to wait on it."""

    def now(self) -> float: ...

    async def sleep(self, dt: float) -> None: ...
