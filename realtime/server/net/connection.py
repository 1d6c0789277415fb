"""One TCP connection on the server's port: a WebSocket handshake or a plain HTTP request.

websockets' server reads only ``GET`` requests, so this subclass of its
``ServerConnection`` (plugged in through ``serve(create_connection=…)``) looks at
the first bytes: ``GET`` goes to websockets unchanged; any other method is read
whole by :func:`voxline.realtime.server.engine.http_api.parse_request` and answered by the
server's HTTP handler during the opening-handshake step, after which the
connection closes without ever becoming a WebSocket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.server import ServerConnection

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.http_api import HttpRequest, HttpResponse, error_body, parse_request

__all__ = ["HttpHandler", "RoutingConnection", "routing_connection"]

HttpHandler = Callable[[HttpRequest], Awaitable[HttpResponse]]

_log = logging.getLogger("voxline.server")


class RoutingConnection(ServerConnection):
    """A websockets connection that answers non-``GET`` requests itself."""

    http_handler: HttpHandler

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._route: str | None = None  # "ws" or "http" once known
        self._pending = bytearray()
        self._http_request: HttpRequest | None = None
        self._http_ready: asyncio.Future[None] = self.loop.create_future()

    def data_received(self, data: bytes) -> None:
        if self._route == "ws":
            super().data_received(data)
            return
        self._pending.extend(data)
        if self._route is None:
            if len(self._pending) < 4:
                return
            if self._pending.startswith(b"GET "):
                self._route = "ws"
                self._http_ready.set_result(None)
                super().data_received(bytes(self._pending))
                self._pending.clear()
                return
            self._route = "http"
        self._read_http()

    def _read_http(self) -> None:
        if self._http_ready.done():
            return
        try:
            request = parse_request(bytes(self._pending))
        except ValueError:
            self._answer_now(
                HttpResponse(
                    400,
                    {
                        "error": {
                            "message": "Malformed HTTP request.",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
            )
            return
        if request is not None:
            self._http_request = request
            self._http_ready.set_result(None)

    def _answer_now(self, response: HttpResponse) -> None:
        self.transport.write(response.encode())
        self.transport.close()
        if not self._http_ready.done():
            self._http_ready.set_result(None)

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        """Route: websockets' handshake for ``GET``, the HTTP handler for anything else."""
        await asyncio.wait([self._http_ready, self.connection_lost_waiter], return_when=asyncio.FIRST_COMPLETED)
        if self._route == "ws":
            await super().handshake(*args, **kwargs)
            return
        if self._http_request is not None:
            try:
                response = await self.http_handler(self._http_request)
            except Exception:  # a bug of ours: answer like the service, never drop the request
                _log.exception("the HTTP handler failed on %s %s", self._http_request.method, self._http_request.path)
                response = HttpResponse(500, error_body(errors.server_error()))
            self._answer_now(response)
        await self.connection_lost_waiter


def routing_connection(handler: HttpHandler) -> type[RoutingConnection]:
    """A :class:`RoutingConnection` class bound to one server's HTTP handler."""
    return type("BoundRoutingConnection", (RoutingConnection,), {"http_handler": staticmethod(handler)})
