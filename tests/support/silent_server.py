"""WebSocket servers on loopback that never open a session: one reads what it is sent and never
answers, one hangs up as soon as it has accepted (:func:`hanging_up`), one answers every connect with
an ``error`` event and a close (:func:`refusing`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from websockets.asyncio.server import ServerConnection, serve

__all__ = ["REFUSAL", "hanging_up", "refusing", "silent"]


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


REFUSAL = "your key sk-refused-0123456789abcdef is not allowed here"  # echoes a key, as servers do


@contextlib.asynccontextmanager
async def refusing(close: bool = True) -> AsyncIterator[Silent]:
    """Each connect: once the client's first frame came (its connect is over then), an ``error`` event (never
    ``session.created``), then a close with 1008 (policy violation), or with ``close=False`` nothing more."""
    async def refuse(connection: ServerConnection) -> None:
        await connection.recv()
        error = {"type": "error", "event_id": "evt_refused",
                 "error": {"type": "invalid_request_error", "code": "not_allowed", "message": REFUSAL, "param": None}}
        await connection.send(json.dumps(error))
        if close:
            await connection.close(1008, "not allowed")
        else:
            await _swallow(connection)

    async with serve(refuse, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield Silent(f"ws://127.0.0.1:{port}/v1")
