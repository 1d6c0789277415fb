"""Waiting on a live session's events in tests, on the wall clock (:func:`until`) or a virtual one (:func:`collect`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from voxline.base.clock import VirtualClock
from voxline.session.voice import VoiceSession

__all__ = ["collect", "until"]


async def until(session: VoiceSession, predicate: Callable[[Any], bool], seen: list[Any] | None = None,
                timeout_s: float = 30.0) -> list[Any]:
    """The session's events up to and including the first for which ``predicate`` holds."""
    seen = [] if seen is None else seen
    async with asyncio.timeout(timeout_s):
        async for event in session:
            seen.append(event)
            if predicate(event):
                return seen
    raise AssertionError(f"the session ended first; saw {[type(e).__name__ for e in seen]}")


async def collect(session: VoiceSession, clock: VirtualClock, until: Callable[[Any], bool],
                  step: float = 0.02, limit_s: float = 60.0) -> list[Any]:
    """Advance virtual time block by block, gathering events until ``until(event)``."""
    seen: list[Any] = []
    iterator = session.__aiter__()
    while clock.now() < limit_s:
        try:
            event = await asyncio.wait_for(iterator.__anext__(), timeout=0.005)
        except asyncio.TimeoutError:
            clock.advance(step)
            continue
        seen.append(event)
        if until(event):
            return seen
    raise AssertionError(f"condition not met; saw {[type(e).__name__ for e in seen]}")
