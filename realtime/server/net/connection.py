"""One TCP connection on the server's port: a WebSocket handshake or a plain HTTP request.

websockets' server reads only ``GET`` requests, so this subclass of its
``ServerConnection`` (plugged in through ``serve(create_connection=…)``) looks at
the first bytes: a ``GET`` head is read whole and goes to websockets unchanged if
websockets can parse it (a head it cannot parse, e.g. with ``Transfer-Encoding`` or a
header line without a colon, it would drop unanswered: here it gets a JSON 400); any other
method is read whole by :func:`voxline.realtime.server.engine.http_message.parse_head` (told
``100 Continue`` before its body if it expects that) and answered by the server's HTTP handler
during the opening-handshake step, after which the connection closes without ever becoming a
WebSocket. A head with bare-LF line endings, which would never end, is answered 400 at once. A
request refused at its head has what still comes of its body read and dropped, within a bound,
so that a client still sending it reads the answer rather than a reset; a non-``GET`` request
half-closed once sent is still answered, and one half-closed before it was whole is told so (a
``GET`` is websockets', which ends a half-closed handshake unanswered).

Every close the server makes (its shutdown's 1001, a session's expiry, an error before a session,
a Live session's end, a sideband's) ends within the connection's ``close_timeout``: websockets'
own deadline covers only the wait for the peer's answer once the close frame is written, not the
wait to write it, so a client that stops reading would hold the close until TCP gave up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.exceptions import SecurityError
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request
from websockets.streams import StreamReader

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec
from voxline.realtime.server.engine.http_api import error_body
from voxline.realtime.server.engine.http_message import (
    CONTINUE,
    HttpRequest,
    HttpResponse,
    RefusedHead,
    RequestHead,
    head_end,
    parse_head,
)

__all__ = ["DISCARD_BYTES", "DISCARD_S", "HttpHandler", "RoutingConnection", "routing_connection"]

HttpHandler = Callable[[HttpRequest], Awaitable[HttpResponse]]

_log = logging.getLogger("voxline.server")

DISCARD_BYTES = 16 * 1024 * 1024
"""How much of a refused request's body is read and dropped, at most, before its connection closes."""
DISCARD_S = 5.0
"""How long a refused request's body is waited for, at most, before its connection closes."""
_DEADLINE_SLACK_S = 0.05  # the deadline's timer starts a moment after the connection is made
MAX_EARLY = 64 * 1024
"""Bytes after a ``GET`` head held before its handshake is answered, past which the socket is not read meanwhile."""


class RoutingConnection(ServerConnection):
    """A websockets connection that answers non-``GET`` requests itself."""

    http_handler: HttpHandler

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._route: str | None = None  # "get", "early" (its head with websockets), "ws", "http" or "refused"
        self._early = bytearray()  # what came after a GET head before its handshake was answered
        self._pending = bytearray()
        self._http_request: HttpRequest | None = None
        self._head: RequestHead | None = None  # a non-GET request's head, once read whole (its body may follow)
        self._continued = False  # "100 Continue" was sent
        self._discard_left = 0  # of a refused request's body, what may still be read and dropped
        self._began = self.loop.time()  # the opening deadline runs from about here
        self._http_ready: asyncio.Future[None] = self.loop.create_future()

    def data_received(self, data: bytes) -> None:
        if self._route == "ws":
            super().data_received(data)
            return
        if self._route == "early":
            self._hold_early(data)
            return
        if self._route == "refused":  # the body of a request refused at its head: read and dropped
            self._discard_left -= len(data)
            if self._discard_left < 0:
                self.transport.close()
            return
        self._pending.extend(data)
        if self._route is None:
            if len(self._pending) < 4:
                return
            self._route = "get" if self._pending.startswith(b"GET ") else "http"
        if self._route == "get":
            self._read_get()
        else:
            self._read_http()

    def _read_get(self) -> None:
        """Hold a ``GET`` head until it is whole; then websockets takes it, or a JSON 400 answers it."""
        try:
            end = head_end(self._pending)
        except ValueError as exc:  # too large, or bare LFs
            self._route = "http"
            self._answer_now(_malformed(exc))
            return
        if end < 0:
            return
        problem = _unparsable(bytes(self._pending[: end + 4]))
        if problem is not None:
            self._route = "http"
            self._answer_now(_malformed(problem))
            return
        self._route = "early"
        self._http_ready.set_result(None)
        super().data_received(bytes(self._pending[: end + 4]))
        self._hold_early(bytes(self._pending[end + 4:]))
        self._pending.clear()

    def _hold_early(self, data: bytes) -> None:
        """Bytes after a ``GET`` head, before its handshake is answered (a client may not send frames before the
        ``101``): held and handed to websockets once it has answered, in order. Given meanwhile, websockets read
        them as frames, failed the connection, then failed again answering the handshake (an internal error, the
        client left unanswered). Past :data:`MAX_EARLY` held, the socket is not read until then."""
        self._early.extend(data)
        if len(self._early) > MAX_EARLY:
            self.transport.pause_reading()

    def _read_http(self) -> None:
        if self._http_ready.done():
            return
        head = self._head
        if head is None:  # the head is read once: a body arriving in many pieces is not parsed again each time
            try:
                head = self._head = parse_head(self._pending)
            except RefusedHead as exc:  # a repeated header, a body too large or without a length, an odd expectation
                self._refuse_before_body(HttpResponse(exc.status, error_body(exc.spec)))
                return
            except ValueError as exc:
                self._refuse_before_body(_malformed(exc))
                return
            if head is None:
                return
        if len(self._pending) < head.body_at + head.length:
            request = None
        else:
            request = head.request(bytes(self._pending))
        if request is None and head.expects_continue and not self._continued:
            self._continued = True
            self.transport.write(CONTINUE)
        if request is not None:
            self._http_request = request
            self._http_ready.set_result(None)

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol returns bool | None
        """The client will send no more. A ``GET`` (a WebSocket, or its handshake) ends as websockets ends it. A
        non-``GET`` request read whole is still answered (a client may half-close once it has sent it: the
        transport stays open for the answer, which then closes it); one cut short is a 400 at once."""
        if self._route == "refused":
            return False  # answered, and the client has sent all it will: the connection closes
        if self._route != "http":
            return super().eof_received()
        if not self._http_ready.done():
            head = self._head
            said = ("the request ended before its head did" if head is None else
                    f"the request ended after {len(self._pending) - head.body_at} of its {head.length} body bytes")
            self._answer_now(_malformed(said))
        return True

    def _refuse_before_body(self, response: HttpResponse) -> None:
        """Answer a request refused at its head, its body perhaps still coming. Closed at once, the socket would be
        reset with that body unread, and a client still sending it (as most send the body before they read) would
        see the reset instead of the answer: the answer goes, the sending side is shut, and what still comes is
        read and dropped, up to :data:`DISCARD_BYTES` or :data:`DISCARD_S`, before the connection closes."""
        self._answer_now(response, linger=self.transport.can_write_eof())

    def _timed_out(self) -> bool:
        """The opening deadline has passed (its cancel, not the server's stop, is ending the handshake)."""
        deadline = getattr(self.server, "open_timeout", None)
        return deadline is not None and self.loop.time() - self._began >= deadline - _DEADLINE_SLACK_S

    def _answer_now(self, response: HttpResponse, *, linger: bool = False) -> None:
        """Write ``response`` and close; ``linger``: shut only the sending side and drop what still comes, within
        the bounds (:meth:`_refuse_before_body`)."""
        head_only = self._pending.startswith(b"HEAD ")  # refused at its head, or answered: a HEAD gets no body
        self.transport.write(response.encode(head_only=head_only))
        if linger:
            self.transport.write_eof()
            self._route, self._discard_left = "refused", DISCARD_BYTES
            self._pending.clear()
            self.loop.call_later(DISCARD_S, self.transport.close)
        else:
            self.transport.close()
        if not self._http_ready.done():
            self._http_ready.set_result(None)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """websockets' closing handshake, the connection aborted if it has not ended within ``close_timeout``.

        websockets sets its close deadline, then waits for the transport to drain before it looks at the
        deadline: while a client leaves what was written unread (the transport paused), that wait has no end.
        """
        try:
            async with asyncio.timeout(self.close_timeout):
                await super().close(code, reason)
        except TimeoutError:
            self.transport.abort()
            await asyncio.shield(self.connection_lost_waiter)

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        """Route: websockets' handshake for ``GET``, the HTTP handler for anything else. A request begun but not read
        whole by the opening deadline (websockets' ``open_timeout``, which cancels this) is answered 408 before the
        connection closes; any other cancel (the server stopping) answers nothing."""
        try:
            await asyncio.wait([self._http_ready, self.connection_lost_waiter], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if self._timed_out() and self._pending and not self._http_ready.done() and not self.transport.is_closing():
                self._answer_now(HttpResponse(408, error_body(errors.request_timeout())))
            raise  # a connection that sent nothing (a browser's preconnect) is closed unanswered, as is one at shutdown
        if self._route == "early":
            try:
                await super().handshake(*args, **kwargs)
            finally:  # answered (101 or a refusal): websockets reads what follows as frames, or drops it
                self._route = "ws"
                early, self._early = bytes(self._early), bytearray()
                if early and not self.transport.is_closing():
                    super().data_received(early)
                    self.transport.resume_reading()
            return
        if self._http_request is not None:
            try:
                response = await self.http_handler(self._http_request)
            except Exception:  # a bug of ours: answer like the service, never drop the request
                _log.exception("the HTTP handler failed on %s %s", self._http_request.method, self._http_request.path)
                response = HttpResponse(500, error_body(errors.server_error()))
            self._answer_now(response)
        await self.connection_lost_waiter


def _unparsable(head: bytes) -> str | None:
    """Why websockets' own parser refuses ``head`` (without the values it quotes), or ``None``."""
    reader = StreamReader()
    reader.feed_data(head)
    reader.feed_eof()
    parser = Request.parse(reader.read_line)
    try:
        next(parser)
    except StopIteration as done:
        request: Request = done.value
        if not request.path.isascii():  # websockets keeps other bytes as lone surrogates, which no JSON says back
            return "the request target must be ASCII (other bytes percent-encoded)"
        return None
    except (ValueError, NotImplementedError, EOFError, SecurityError) as exc:  # a line or a header count too large
        return str(exc).partition(":")[0]
    return "incomplete request head"


def routing_connection(handler: HttpHandler) -> type[RoutingConnection]:
    """A :class:`RoutingConnection` class bound to one server's HTTP handler."""
    return type("BoundRoutingConnection", (RoutingConnection,), {"http_handler": staticmethod(handler)})


def _malformed(said: object) -> HttpResponse:
    """The 400 for a request this server cannot read, saying why."""
    return HttpResponse(400, error_body(ErrorSpec(f"Malformed HTTP request: {said}.", None)))
