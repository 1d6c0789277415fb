"""WebSocket servers on loopback that never send an event: one reads what it is sent and never
answers, one hangs up as soon as it has accepted (:func:`hanging_up`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from websockets.asyncio.server import ServerConnection, serve

__all__ = ["hanging_up", "silent"]


@dataclass
class Silent:
    url: str


async def _swallow(connection: ServerConnection) -> None:
    async for _message in connection:
        pass


@contextlib.asynccontextmanager
async def silent() -> AsyncIterator[Silent]:
    async with serve(_swallow, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield Silent(f"ws://127.0.0.1:{port}/v1")


@contextlib.asynccontextmanager
async def hanging_up(after_first_frame: bool = False) -> AsyncIterator[Silent]:
    """Hangs up at once, or once the client has sent its first frame (its session is open by then)."""
    async def hang_up(connection: ServerConnection) -> None:
        if after_first_frame:
            await connection.recv()
        await connection.close(1000, "")

    async with serve(hang_up, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield Silent(f"ws://127.0.0.1:{port}/v1")
