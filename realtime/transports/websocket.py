"""WebSocket transport (websockets): ``wss://…/v1/realtime?model=…`` with ``Authorization: Bearer``.

No ``OpenAI-Beta`` header is ever sent: that selects the retired beta protocol
(PROTOCOL.md §1). The token is held privately and never appears in a repr or an error.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed as WsConnectionClosed
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from ..errors import ConfigurationError, ConnectionClosed, ConnectionFailed, redact
from .failures import connect_failure, http_status

__all__ = ["WebSocketTransport", "realtime_url"]

DEFAULT_URL = "wss://api.openai.com/v1"
log = logging.getLogger("voxline.realtime")
MAX_FRAME = 16 * 1024 * 1024  # one append may carry 15 MiB of base64


def realtime_url(base: str, *, model: str | None = None, call_id: str | None = None) -> str:
    """Build the connect URL the way the official SDK does.

    ``base`` may be the API base (``wss://api.openai.com/v1``, ``http://127.0.0.1:8765/v1``)
    or a full ``…/realtime`` URL; http(s) becomes ws(s) and ``?model=`` is added.
    """
    parts = urllib.parse.urlsplit(base)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ConfigurationError(f"not a WebSocket or HTTP URL: {base!r}")
    path = parts.path.rstrip("/")
    if not path.endswith("/realtime"):
        path += "/realtime"
    query = dict(urllib.parse.parse_qsl(parts.query))
    if model and "model" not in query and not call_id:
        query["model"] = model
    if call_id:
        query["call_id"] = call_id
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, urllib.parse.urlencode(query), ""))


class WebSocketTransport:
    """A connected Realtime WebSocket; create with :meth:`connect`."""

    media = None  # audio goes inside events

    def __init__(self, ws: ClientConnection, url: str) -> None:
        self._ws = ws
        self.url = url
        self.close_code: int | None = None
        self.close_reason = ""

    def __repr__(self) -> str:
        return f"<WebSocketTransport {self.url} {'open' if self.close_code is None else 'closed'}>"

    @classmethod
    async def connect(
        cls,
        base_url: str,
        token: str,
        *,
        model: str | None = "gpt-realtime",
        open_timeout: float = 10.0,
        max_queue: int = 64,
        extra_headers: dict[str, str] | None = None,
    ) -> WebSocketTransport:
        url = realtime_url(base_url, model=model)
        headers = {"Authorization": f"Bearer {token}", **(extra_headers or {})}
        try:
            ws = await connect(
                url,
                additional_headers=headers,
                open_timeout=open_timeout,
                max_size=MAX_FRAME,
                max_queue=max_queue,
                compression=None,
            )
        except InvalidStatus as exc:
            failure = http_status(url, exc.response.status_code)
            log.info("connect failed: %s", redact(failure))
            raise ConnectionFailed(failure) from None
        except InvalidURI as exc:
            raise ConfigurationError(f"invalid URL {url!r}: {exc}") from None
        except (OSError, InvalidHandshake, asyncio.TimeoutError) as exc:
            failure = connect_failure(url, exc)
            log.info("connect failed: %s", redact(failure))
            raise ConnectionFailed(failure) from None
        log.info("connected to %s (WebSocket)", redact(url))  # the token goes in a header, never in a log
        return cls(ws, url)

    async def send(self, text: str) -> None:
        try:
            await self._ws.send(text)
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None

    async def recv(self) -> str:
        try:
            frame = await self._ws.recv()
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None
        return frame if isinstance(frame, str) else frame.decode("utf-8", "replace")

    async def ping(self) -> None:
        """A WebSocket ping; returns when the server's pong arrives."""
        try:
            pong = await self._ws.ping()
            await pong
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._ws.close(code, reason)
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason

    def _closed(self, exc: WsConnectionClosed) -> ConnectionClosed:
        frame = exc.rcvd or exc.sent
        code = frame.code if frame is not None else 1006
        reason = frame.reason if frame is not None else "no close frame"
        self.close_code, self.close_reason = code, reason
        log.info("connection to %s closed: %s %s", redact(self.url), code, redact(reason))
        return ConnectionClosed(code, reason)

