"""A sideband WebSocket on a WebRTC call: ``GET /v1/realtime?call_id=…`` with the API key.

A trusted backend attaches to a call whose media runs elsewhere (a kiosk, a browser),
sees the call's events and may send any client event: tool outputs, ``response.create``,
``session.update`` (docs/protocol.md §2). The call pushes its events here with
:meth:`Sideband.push` (never blocking: a queue feeds the socket); frames read from the
socket go to the call's handler, but none while more than
:data:`~voxline.realtime.server.net.ws_session.UNREAD_BYTES` of events wait for it, until it
catches up, as a session's own WebSocket (a ``conversation.item.retrieve`` of a few bytes is
answered with megabytes). Errors caused by a sideband frame go back to this
socket only. When the call ends, :meth:`Sideband.close` closes the socket with 1000; a frame
that ends the sideband's own session (a beta-only event) closes it with 4000, and the call goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voxline.realtime.server.engine.errors import ErrorSpec
from voxline.realtime.server.net.ws_session import UNREAD_BYTES

__all__ = ["Sideband", "call_not_found", "sideband_needs_api_key"]


def call_not_found(call_id: str) -> ErrorSpec:
    """No running call has this id (it never existed, or it ended)."""
    return ErrorSpec(f"Call '{call_id}' not found.", "call_not_found", "call_id")


def sideband_needs_api_key() -> ErrorSpec:
    """An ephemeral key cannot attach to a call: the sideband is for the server holding the API key."""
    return ErrorSpec("Attaching to a call with ?call_id= needs an API key, not an ephemeral key.", "invalid_api_key")


class Sideband:
    """One attached socket; :meth:`run` serves it until either side closes."""

    def __init__(self, connection: ServerConnection) -> None:
        self._connection = connection
        self._queue: asyncio.Queue[str | tuple[int, str]] = asyncio.Queue()  # events, then the close
        self.unsent = 0  # characters of the events that wait to be written
        self._empty = asyncio.Event()  # nothing waits to be written
        self._empty.set()

    def push(self, text: str) -> None:
        """Queue one server event (a JSON text frame)."""
        self._queue.put_nowait(text)
        self.unsent += len(text)
        self._empty.clear()

    def close(self, code: int = 1000, reason: str = "call ended") -> None:
        """End the socket after the events already queued."""
        self._queue.put_nowait((code, reason))

    async def run(self, on_frame: Callable[[str | bytes], None]) -> None:
        """Write queued events and hand each received frame to ``on_frame`` until the socket closes."""
        writer = asyncio.create_task(self._write())
        try:
            with contextlib.suppress(ConnectionClosed):
                async for message in self._connection:
                    on_frame(message)
                    if self.unsent > UNREAD_BYTES:  # a client that sends without reading: its frames wait
                        await self._empty.wait()
        finally:
            if not writer.done():
                writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await writer

    async def _write(self) -> None:
        try:
            while isinstance(item := await self._queue.get(), str):
                await self._connection.send(item)
                self.unsent -= len(item)
                if self._queue.empty():
                    self._empty.set()
            await self._connection.close(*item)
        finally:  # nothing more will be written: a reader waiting for the client to catch up goes on, to the end
            self._empty.set()
