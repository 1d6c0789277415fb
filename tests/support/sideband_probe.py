"""A server-side :class:`Sideband` the test can see: installed in place of the server's own, it records each one made,
says when one was cut off for not reading and when it finished serving."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from websockets.asyncio.server import ServerConnection

from voxline.realtime.server.live import ws as live_ws
from voxline.realtime.server.net import app, sideband

__all__ = ["ProbedSideband", "probe_sidebands", "sideband_tasks"]


class ProbedSideband(sideband.Sideband):
    made: list[ProbedSideband]

    def __init__(self, connection: ServerConnection) -> None:
        super().__init__(connection)
        self.made.append(self)
        self.gone = asyncio.Event()  # cut off
        self.ended = asyncio.Event()  # run() returned

    def push(self, text: str) -> None:
        super().push(text)
        if self.cut_off:
            self.gone.set()

    async def run(self, on_frame: Callable[[str | bytes], None]) -> None:
        try:
            await super().run(on_frame)
        finally:
            self.ended.set()


def probe_sidebands(monkeypatch: pytest.MonkeyPatch, limit: int) -> list[ProbedSideband]:
    """Serve every sideband with a :class:`ProbedSideband`, cut off past ``limit`` characters unwritten."""
    made: list[ProbedSideband] = []
    probe = type("Probe", (ProbedSideband,), {"made": made})
    monkeypatch.setattr(sideband, "UNSENT_LIMIT", limit)
    monkeypatch.setattr(app, "Sideband", probe)
    monkeypatch.setattr(live_ws, "Sideband", probe)
    return made


def sideband_tasks() -> list[asyncio.Task[object]]:
    """Tasks still running a sideband's coroutines."""
    return [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.startswith("Sideband.")]  # type: ignore[union-attr]
