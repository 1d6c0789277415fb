"""A sideband WebSocket on a WebRTC call: ``GET /v1/realtime?call_id=…`` with the API key.

A trusted backend attaches to a call whose media runs elsewhere (a kiosk, a browser),
sees the call's events and may send any client event: tool outputs, ``response.create``,
``session.update`` (docs/protocol.md §2). The call pushes its events here with
:meth:`Sideband.push` (never blocking: a queue feeds the socket); frames read from the
socket go to the call's handler, but none while more than
:data:`~voxline.realtime.server.net.ws_session.UNREAD_BYTES` of events wait for it, until it
catches up, as a session's own WebSocket (a ``conversation.item.retrieve`` of a few bytes is
answered with megabytes). The call's own events keep coming whether the client reads or not
(on Live, audio in both directions): past :data:`UNSENT_LIMIT` of them waiting, the sideband is
closed with 4009 ``invalid_request_error.sideband_unread_limit``, what waits let go at once,
and the call goes on. Errors caused by a sideband frame go back to this
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
from voxline.realtime.server.net.ws_session import UNREAD_BYTES, close_reason

__all__ = ["UNSENT_LIMIT", "Sideband", "call_not_found", "sideband_needs_api_key", "sideband_unread_limit"]

UNSENT_LIMIT = 4 * UNREAD_BYTES
"""Events a sideband may leave waiting unwritten before it is closed: a client that never reads would otherwise have
the call's events (on Live, about 460 MB of audio an hour) held for it until the call ends. A call's caller that
leaves as much waiting on its data channel is hung up on (:func:`~voxline.realtime.server.net.rtc_offer.send_or_refuse`)."""

def call_not_found(call_id: str) -> ErrorSpec:
    """No running call has this id (it never existed, or it ended)."""
    return ErrorSpec(f"Call '{call_id}' not found.", "call_not_found", "call_id")


def sideband_needs_api_key() -> ErrorSpec:
    """An ephemeral key cannot attach to a call: the sideband is for the server holding the API key."""
    return ErrorSpec("Attaching to a call with ?call_id= needs an API key, not an ephemeral key.", "invalid_api_key")


def sideband_unread_limit() -> ErrorSpec:
    """The close of a sideband that left more than :data:`UNSENT_LIMIT` of events unread (*local*)."""
    return ErrorSpec("The sideband left too many events unread and was closed; the call goes on.",
                     "sideband_unread_limit")


class Sideband:
    """One attached socket; :meth:`run` serves it until either side closes."""

    def __init__(self, connection: ServerConnection) -> None:
        self._connection = connection
        self._queue: asyncio.Queue[str | tuple[int, str]] = asyncio.Queue()  # events, then the close
        self.unsent = 0  # characters of the events that wait to be written
        self._empty = asyncio.Event()  # nothing waits to be written
        self._empty.set()
        self._cut = asyncio.Event()  # more than UNSENT_LIMIT waited: what waits is let go, the socket closed
        self._writer: asyncio.Task[None] | None = None

    @property
    def cut_off(self) -> bool:
        """Closed (or closing) for leaving more than :data:`UNSENT_LIMIT` of events unread."""
        return self._cut.is_set()

    @property
    def waiting(self) -> int:
        """Items (events, a close) queued for the writer."""
        return self._queue.qsize()

    def push(self, text: str) -> None:
        """Queue one server event (a JSON text frame); past :data:`UNSENT_LIMIT` waiting, cut the sideband off."""
        if self._cut.is_set():
            return
        self._queue.put_nowait(text)
        self.unsent += len(text)
        self._empty.clear()
        if self.unsent > UNSENT_LIMIT:
            self._cut_off()

    def close(self, code: int = 1000, reason: str = "call ended") -> None:
        """End the socket after the events already queued."""
        if not self._cut.is_set():
            self._queue.put_nowait((code, reason))

    def _cut_off(self) -> None:
        """Let go of what waits and stop the writer at once (it is stuck in a send the client does not read);
        :meth:`run` closes the socket itself."""
        self._cut.set()
        self._queue = asyncio.Queue()
        self.unsent = 0
        self._empty.set()
        if self._writer is not None:
            self._writer.cancel()

    async def run(self, on_frame: Callable[[str | bytes], None]) -> None:
        """Write queued events and hand each received frame to ``on_frame`` until the socket closes."""
        self._writer = writer = asyncio.create_task(self._write())
        reader = asyncio.create_task(self._read(on_frame))
        cut = asyncio.create_task(self._cut.wait())
        try:
            await asyncio.wait((reader, cut), return_when=asyncio.FIRST_COMPLETED)
            if self._cut.is_set():
                reader.cancel()
                writer.cancel()
                await asyncio.gather(reader, writer, return_exceptions=True)
                await self._close_now(sideband_unread_limit())
        finally:
            for task in (reader, writer, cut):
                task.cancel()
            await asyncio.gather(reader, writer, cut, return_exceptions=True)
        for task in (reader, writer):  # a bug of ours in either is not swallowed; the socket closing is the end
            failure = None if task.cancelled() else task.exception()
            if failure is not None and not isinstance(failure, ConnectionClosed):
                raise failure

    async def _read(self, on_frame: Callable[[str | bytes], None]) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in self._connection:
                on_frame(message)
                if self.unsent > UNREAD_BYTES:  # a client that sends without reading: its frames wait
                    await self._empty.wait()

    async def _close_now(self, spec: ErrorSpec) -> None:
        """A close frame behind what the socket already holds; a client that does not take it within the server's
        ``close_timeout_s`` has its connection aborted (:meth:`RoutingConnection.close
        <voxline.realtime.server.net.connection.RoutingConnection.close>`)."""
        with contextlib.suppress(ConnectionClosed):
            await self._connection.close(4009, close_reason(spec))

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
