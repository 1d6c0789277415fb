"""Counting passes of the running event loop, for tests of what happens per pass."""

from __future__ import annotations

import asyncio


class Passes:
    """Counts passes of the running loop: a callback that schedules itself again runs once per pass."""

    def __init__(self) -> None:
        self.n = 0
        self._stopped = False
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        if not self._stopped:
            self.n += 1
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._stopped = True
