"""A WebSocket server on loopback that accepts every connection, reads what it is sent and never answers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from websockets.asyncio.server import ServerConnection, serve

__all__ = ["silent"]


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
