"""A Realtime connection: the protocol core pumped over one transport.

``RealtimeConnection`` is deliberately thin. Commands go to :attr:`protocol` and are
flushed with :meth:`flush`; :meth:`recv` reads frames until the core has something to
say. No task runs in the background: the owner drives receiving.

Every frame crossing the wire is shown to an optional observer
``on_wire(direction, text)`` with direction ``"out"`` (client → server) or ``"in"``;
event logs and the test oracle are built on it. The observer is the application's code:
whatever it raises (but ``KeyboardInterrupt``), and an awaitable it hands back (never awaited: closed), is
logged once per connection and counted in :attr:`RealtimeConnection.observer_failures`; the frame is sent or
read all the same.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from .errors import ConnectionClosed
from .frames import DroppedFrame
from .protocol import ProtocolOutput, RealtimeProtocol
from .transports.base import Abortable, PeeksQueued, Transport
from voxline.base.models import DEFAULT_REALTIME_MODEL

__all__ = ["RealtimeConnection", "WireObserver", "connect"]

WireObserver = Callable[[str, str], None]

_SMALL_FRAME = 1024
"""Frames :meth:`RealtimeConnection.queued` looks into: control events; audio deltas are larger."""
_LOOK_AHEAD = 64
"""Frames :meth:`RealtimeConnection.queued` looks at, at most: what websockets queues before it stops reading."""

_log = logging.getLogger("voxline.realtime")


def of_type(event_type: str) -> Callable[[bytes], bool]:
    """A test of a frame's bytes: an event whose ``type`` is ``event_type``, as JSON writes it (``"type":"…"``
    or ``"type": "…"``). The same text inside a string is escaped and does not match; other spacing is
    not recognised (it is only looked for, never relied on)."""
    compact, spaced = (f'"type":"{event_type}"'.encode(), f'"type": "{event_type}"'.encode())

    def matches(data: bytes) -> bool:
        return compact in data or spaced in data

    return matches


_ABANDONED = "the peer stopped answering, and its connection was given up"


class RealtimeConnection:
    """The protocol core plus one transport."""

    def __init__(
        self,
        transport: Transport,
        protocol: RealtimeProtocol | None = None,
        *,
        on_wire: WireObserver | None = None,
    ) -> None:
        self.transport = transport
        self.protocol = protocol or RealtimeProtocol()
        limit = getattr(transport, "max_message_bytes", None)
        if isinstance(limit, int) and 0 < limit < self.protocol.max_event_bytes:
            self.protocol.max_event_bytes = limit  # refused as the event is queued, not when it is sent
        self._on_wire = on_wire
        self._pending: deque[ProtocolOutput] = deque()
        self._peeks = transport if isinstance(transport, PeeksQueued) else None
        self._unsent: deque[str] = deque()  # frames taken from the core, sent one at a time in this order
        self.close_code: int | None = None
        self.close_reason = ""
        self._receiving: asyncio.Task[Any] | None = None  # the task waiting in the transport's recv
        self._abandoned = False
        self.observer_failures = 0
        """How many times ``on_wire`` raised (only the first is logged)."""

    def __repr__(self) -> str:
        return f"<RealtimeConnection {self.transport!r}>"

    async def __aenter__(self) -> RealtimeConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self.close_code is not None

    @property
    def has_data_to_send(self) -> bool:
        """True while frames wait for :meth:`flush`."""
        return bool(self._unsent) or self.protocol.has_data_to_send

    async def flush(self) -> None:
        """Send every frame the protocol core has queued.

        Frames are taken one at a time, each as it is handed to the transport (which writes it
        before it waits, if it waits at all): a flush waiting on a full socket and another flush,
        or :meth:`flush_now`, never put frames on the wire out of order.
        """
        while (text := self._next_frame()) is not None:
            self._unsent.popleft()
            self._observe("out", text)
            try:
                await self.transport.send(text)
            except ConnectionClosed as exc:
                self._lost(exc)
                raise

    def flush_now(self) -> bool:
        """Send the frames the core has queued without waiting, as far as the transport can
        (:class:`~voxline.realtime.transports.base.SendsNow`); False if some are left for :meth:`flush`."""
        try_send = getattr(self.transport, "try_send", None)
        if try_send is None:
            return not self.has_data_to_send
        while (text := self._next_frame()) is not None:
            try:
                sent = try_send(text)
            except ConnectionClosed as exc:
                self._lost(exc)
                raise
            if not sent:
                return False
            self._unsent.popleft()
            self._observe("out", text)
        return True

    def add_wire_observer(self, observer: WireObserver) -> None:
        """Show every frame from now on to ``observer`` too, after the observer given at construction (if any)."""
        first = self._on_wire
        if first is None:
            self._on_wire = observer
            return

        def both(direction: str, text: str) -> None:
            try:
                first(direction, text)
            finally:  # the second sees the frame whatever the first did
                observer(direction, text)

        self._on_wire = both

    def _observe(self, direction: str, text: str) -> None:
        """Show a frame to ``on_wire``; its failure never costs the frame or the connection."""
        if self._on_wire is None:
            return
        try:
            answer = self._on_wire(direction, text)
        except KeyboardInterrupt:
            raise
        except BaseException:  # the application's observer (an event log on a full disk, say)
            self.observer_failures += 1
            if self.observer_failures == 1:
                _log.exception("the wire observer failed on an %r frame; frames are still sent and read, "
                               "and further failures are not logged", direction)
            return
        # a plain function handing back work nobody runs (a lambda around a put); None, the rule, costs one test
        if answer is not None and inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()  # never run, and no 'never awaited' warning for each frame
            self.observer_failures += 1
            if self.observer_failures == 1:
                _log.error("the wire observer returned %s instead of doing its work: it is called for every frame "
                           "and never awaited (use a plain function, or put_nowait)", type(answer).__name__)

    def _next_frame(self) -> str | None:
        """The next frame to send (left at the head of the queue until it is taken), or None."""
        if not self._unsent:
            self._unsent.extend(self.protocol.data_to_send())
        return self._unsent[0] if self._unsent else None

    async def send(self, event: Any) -> str | None:
        """Send one client event (model or dict) through the core's rules."""
        event_id = self.protocol.send(event)
        await self.flush()
        return event_id

    async def send_raw(self, text: str) -> None:
        """Send a frame untouched by the core (for tests of peers' error handling)."""
        self._observe("out", text)
        await self.transport.send(text)

    def queued(self, event_type: str) -> int | None:
        """How many events wait ahead of an event of ``event_type`` that is next but a few: parsed
        already, or (a transport that can look, :class:`~voxline.realtime.transports.base.PeeksQueued`)
        in a small frame among the next frames read and not yet taken, counted a frame an event;
        None if there is none. A look costs at most a few dozen length checks."""
        for ahead, out in enumerate(itertools.islice(self._pending, _LOOK_AHEAD)):
            if getattr(out, "type", None) == event_type:
                return ahead
        if self._peeks is None:
            return None
        found = self._peeks.queued_where(of_type(event_type), _SMALL_FRAME, _LOOK_AHEAD)
        return None if found is None else len(self._pending) + found

    def watch_for(self, event_type: str, seen: Callable[[], None]) -> None:
        """Call ``seen`` as soon as a (small) frame of ``event_type`` is read, before :meth:`recv` takes it,
        where the transport can tell (:class:`~voxline.realtime.transports.base.PeeksQueued`); else never.
        ``seen`` runs in the transport's read callback: it must not block."""
        if self._peeks is not None:
            self._peeks.watch_for(of_type(event_type), _SMALL_FRAME, seen)

    async def recv(self) -> ProtocolOutput:
        """The next server event or notice; raises ConnectionClosed once everything was read."""
        while not self._pending:
            if self.closed:
                raise ConnectionClosed(self.close_code, self.close_reason)
            receiving = self._receiving = asyncio.current_task()
            try:
                text = await self.transport.recv()  # a frame already read comes back without waiting (ReceivesNow)
            except ConnectionClosed as exc:
                self._lost(exc)
                continue
            except asyncio.CancelledError:
                if not self._abandoned:
                    raise
                if receiving is not None:
                    receiving.uncancel()  # the cancel was abandon()'s, not the caller's
                self._lost(ConnectionClosed(1006, _ABANDONED))
                continue
            finally:
                self._receiving = None
            if not isinstance(text, DroppedFrame):  # nothing of it came in: not a wire frame
                self._observe("in", text)
            self.protocol.receive(text)
            self._pending.extend(self.protocol.events())
            await self.flush()  # the core may have sent a queued response.create
        return self._pending.popleft()

    async def last_words(self) -> list[ProtocolOutput]:
        """What the transport had read and :meth:`recv` had not taken, parsed, without waiting for more (a server
        that refuses a connection sends an ``error`` and closes at once, and a send may meet the close before a
        read does): the frames a transport that can hand them over now (``try_recv``) holds, or, from one that is
        closed (its ``close_code`` set), what it holds before it raises; nothing from one still open."""
        outputs = list(self._pending)
        self._pending.clear()
        take_now: Callable[[], str | None] | None = getattr(self.transport, "try_recv", None)  # ReceivesNow
        while True:
            if take_now is not None:
                text: str | None = take_now()
                if text is None:
                    return outputs
            elif getattr(self.transport, "close_code", None) is None:
                return outputs  # still open: its next frame is not a last word, and may never come
            else:
                try:
                    text = await self.transport.recv()  # a closed transport hands over what it holds, then raises
                except ConnectionClosed:
                    return outputs
            if not isinstance(text, DroppedFrame):
                self._observe("in", text)
            self.protocol.receive(text)
            outputs.extend(self.protocol.events())

    async def __aiter__(self) -> AsyncIterator[ProtocolOutput]:
        """Events until the connection closes."""
        while True:
            try:
                yield await self.recv()
            except ConnectionClosed:
                return

    def abandon(self) -> None:
        """Give up on a connection whose peer stopped answering (its close went unanswered): drop the transport
        at once where it can (:class:`~voxline.realtime.transports.base.Abortable`), else end a receive waiting
        on it; either way :meth:`recv` raises ConnectionClosed now, not at the transport's own timeout (or
        never, for a transport that has none)."""
        self._abandoned = True
        if isinstance(self.transport, Abortable):
            self.transport.abort()
        elif self._receiving is not None and not self._receiving.done():
            self._receiving.cancel()

    def _lost(self, exc: ConnectionClosed) -> None:
        if self.close_code is None:
            self.close_code, self.close_reason = exc.code, exc.reason
            self.protocol.connection_lost()
            self._pending.extend(self.protocol.events())

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the transport; responses still in flight become *unknown*."""
        await self.transport.close(code, reason)
        self._lost(ConnectionClosed(code, reason))


async def connect(
    base_url: str,
    token: str,
    *,
    model: str | None = DEFAULT_REALTIME_MODEL,
    on_wire: WireObserver | None = None,
    **options: Any,
) -> RealtimeConnection:
    """Open a WebSocket Realtime connection (see :class:`WebSocketTransport` for options)."""
    from .transports.websocket import WebSocketTransport

    transport = await WebSocketTransport.connect(base_url, token, model=model, **options)
    return RealtimeConnection(transport, on_wire=on_wire)
