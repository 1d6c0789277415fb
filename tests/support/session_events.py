"""Waiting on a live session's events in tests: one helper for every file that needs it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from voxline.session.voice import VoiceSession


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
