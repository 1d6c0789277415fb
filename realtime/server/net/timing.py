"""Waiting on the first of several things, for the server's pacers.

The server's clock is :class:`voxline.base.clock.Clock` (``ServerConfig.clock``): a
``RealClock`` by default, a ``VirtualClock`` in lockstep tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

__all__ = ["first_of"]


async def first_of(*waits: Awaitable[Any]) -> None:
    """Wait for the first of ``waits`` (e.g. a sleep and a wake-up); cancel and reap the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
