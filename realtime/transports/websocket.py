"""WebSocket transport (websockets): ``wss://…/v1/realtime?model=…`` with ``Authorization: Bearer``.

No ``OpenAI-Beta`` header is ever sent: that selects the retired beta protocol
(docs/protocol.md §1). The token is held privately and never appears in a repr or an error;
it is registered for redaction, so websockets' DEBUG log of the handshake, an error a server
echoes with the key in it and a close reason all show ``[redacted]`` instead. The
``Authorization`` header goes to the configured origin only: websockets follows redirects
with the same headers, so a redirect to another scheme, host or port is refused here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import inspect
import itertools
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.frames import Frame, Opcode
from websockets.protocol import Event
from websockets.protocol import State
from websockets.uri import parse_uri
from websockets.exceptions import ConnectionClosed as WsConnectionClosed
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.base.redaction import (install_log_redaction, redact, redact_log_arguments_whole, redact_url,
                                    register_url_secrets, scrub)
from voxline.base.urls import is_loopback_url

from ..errors import ConfigurationError, ConnectionClosed, ConnectionFailed
from ..events.codec import MAX_CLIENT_EVENT_BYTES
from .base import FrameTest
from .failures import connect_failure, error_detail, http_status
from .http import bearer_token, split_userinfo

__all__ = ["WebSocketTransport", "realtime_url"]

DEFAULT_URL = "wss://api.openai.com/v1"
log = logging.getLogger("voxline.realtime")
# The echo of the largest client event must come back: the service returns an item whole
# (conversation.item.added, .done), and a JSON encoder that escapes non-ASCII makes its text up to three
# times as long (two UTF-8 bytes as six, a four-byte emoji as twelve).
MAX_FRAME = 3 * MAX_CLIENT_EVENT_BYTES + 1024 * 1024
_REDIRECTS = (300, 301, 302, 303, 307, 308)

_TAKES_PROXY = "proxy" in inspect.signature(connect).parameters  # websockets 15 dials through the environment's


def _direct_to(url: str) -> dict[str, Any]:
    """``connect`` options for ``url``: a server on this machine is dialled directly, so that no proxy the
    environment names is handed the key (websockets before 15 takes no proxy at all)."""
    return {"proxy": None} if _TAKES_PROXY and is_loopback_url(url) else {}


def _frame_redacted_whole(arg: object) -> object:
    """A frame websockets logs at DEBUG, its text (a close frame's reason) redacted whole: the log shows only its
    first 48 and last 24 characters, where a key across the cut is no longer recognised."""
    if not isinstance(arg, Frame) or arg.opcode not in (Opcode.TEXT, Opcode.CLOSE):
        return arg
    head, body = (b"", bytes(arg.data)) if arg.opcode is Opcode.TEXT else (bytes(arg.data[:2]), bytes(arg.data[2:]))
    text = body.decode("utf-8", "replace")
    clean = redact(text)
    return arg if clean == text else dataclasses.replace(arg, data=head + clean.encode("utf-8"))


install_log_redaction()
redact_log_arguments_whole(_frame_redacted_whole)


class _WatchedConnection(ClientConnection):
    """websockets' client connection, telling :attr:`on_frame` of each frame as it is read."""

    on_frame: Callable[[Frame], None] | None = None

    def process_event(self, event: Event) -> None:
        super().process_event(event)
        if self.on_frame is not None and isinstance(event, Frame):
            self.on_frame(event)


class _SameOriginConnect(connect):
    """websockets' ``connect``, following a redirect only within the origin it was given."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        target = super().process_redirect(exc)
        if not isinstance(target, str):
            return target
        old, new = parse_uri(self.uri), parse_uri(target)
        if (old.secure, old.host, old.port) != (new.secure, new.host, new.port):
            return exc  # not followed: the caller reports the redirect's status
        return target


def realtime_url(base: str, *, model: str | None = None, call_id: str | None = None) -> str:
    """Build the connect URL the way the official SDK does.

    ``base`` may be the API base (``wss://api.openai.com/v1``, ``http://127.0.0.1:8765/v1``)
    or a full ``…/realtime`` URL; http(s) becomes ws(s) and ``?model=`` is added. Userinfo
    (``user:key@``) is dropped: the key goes in the one ``Authorization`` header.
    """
    parts = urllib.parse.urlsplit(split_userinfo(base)[0])
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

    def __init__(self, ws: ClientConnection, url: str, token: str = "") -> None:
        self._ws = ws
        # websockets' asyncio connection as of 13: what send() checks and does, for the common case
        self._direct = all(hasattr(ws, name) for name in ("paused", "fragmented_send_waiter", "send_data"))
        # and what recv() takes a message from: the frames its reads left queued
        messages = getattr(ws, "recv_messages", None)
        self._frames = getattr(getattr(messages, "frames", None), "queue", None)
        self._messages = messages if self._frames is not None and hasattr(messages, "maybe_resume") else None
        self._closing = False  # close() began: its drain may be the one reading
        self.waits = 0
        """How many frames :meth:`recv` had to wait for (the others were taken as read)."""
        self.url = url
        self._token = token
        self.close_code: int | None = None
        self.close_reason = ""
        self.server_time: float | None = None  # the server's clock at the handshake (its Date header), unix s

    def __repr__(self) -> str:
        return f"<WebSocketTransport {redact_url(self.url)} {'open' if self.close_code is None else 'closed'}>"

    @classmethod
    async def connect(
        cls,
        base_url: str,
        token: str,
        *,
        model: str | None = DEFAULT_REALTIME_MODEL,
        call_id: str | None = None,
        open_timeout: float = 10.0,
        max_queue: int = 64,
        extra_headers: dict[str, str] | None = None,
        url: str | None = None,
    ) -> WebSocketTransport:
        """Open the socket; with ``call_id`` it is the sideband of that running call (no model).

        ``url``: connect to exactly this ``ws(s)://`` URL instead (another interface's path, such as
        GPT-Live's ``/v1/live/sessions``); ``base_url`` then only lends its userinfo key.
        """
        register_url_secrets(base_url)
        url = url or realtime_url(base_url, model=model, call_id=call_id)
        token = bearer_token(token or split_userinfo(base_url)[1], url)  # the configured key wins over the URL's
        headers = {"Authorization": f"Bearer {token}", **(extra_headers or {})}
        error: ConfigurationError | ConnectionFailed | None = None
        try:
            ws = await _SameOriginConnect(
                url,
                additional_headers=headers,
                open_timeout=open_timeout,
                max_size=MAX_FRAME,
                max_queue=max_queue,
                compression=None,
                create_connection=_WatchedConnection,
                **_direct_to(url),
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            failure = http_status(url, status, token)
            if status in _REDIRECTS:
                failure += " (a redirect to another origin; not followed with the API key)"
            elif status >= 400:
                failure += error_detail(exc.response.body or b"")  # the service's JSON error says why
            log.info("connect failed: %s", redact(failure))
            error = ConnectionFailed(failure, status)
        except InvalidURI as exc:
            error = ConfigurationError(f"invalid URL {url!r}: {exc}")
        except (OSError, InvalidHandshake, asyncio.TimeoutError) as exc:
            failure = connect_failure(url, exc, token)
            log.info("connect failed: %s", redact(failure))
            error = ConnectionFailed(failure)
        if error is not None:  # raised outside the handler: the library's exception (its response, headers,
            raise error        # a body that may echo the key) is not kept as this one's __context__
        log.info("connected to %s (WebSocket)", redact_url(url))  # the token goes in a header, never in a log
        transport = cls(ws, url, token)
        transport.server_time = _date_of(ws)
        return transport

    def try_send(self, text: str) -> bool:
        """Write one frame now if the connection can take it without waiting; False if :meth:`send` must."""
        ws = self._ws
        if not (self._direct and ws.protocol.state is State.OPEN and not ws.paused and ws.fragmented_send_waiter is None):
            return False
        # the frame and the socket write that ws.send() would do, without its async context,
        # which costs as much again per frame
        ws.protocol.send_text(text.encode())
        try:
            ws.send_data()
        except OSError as exc:  # the frame may be half written: the connection cannot go on
            ws.transport.abort()
            self.close_code, self.close_reason = 1006, f"the socket failed: {exc.strerror or exc}"
            raise ConnectionClosed(self.close_code, self.close_reason) from None
        return True

    async def send(self, text: str) -> None:
        if self.try_send(text):
            return
        try:
            await self._ws.send(text)
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None

    def try_recv(self) -> str | None:
        """The next message if a read left it whole in websockets' queue, else None.

        What ``ws.recv()`` would return for it, without its coroutines and, for the frames of
        one read after the first, without a future each.
        """
        messages, frames = self._messages, self._frames
        if messages is None or not frames or messages.get_in_progress:
            return None
        frame = frames[0]
        if not frame.fin or frame.opcode not in (Opcode.TEXT, Opcode.BINARY):
            return None  # a fragmented message: recv() reassembles it
        frames.popleft()
        messages.maybe_resume()
        return self._scrub(bytes(frame.data).decode("utf-8", "replace"))

    def watch_for(self, matches: FrameTest, max_bytes: int, seen: Callable[[], None]) -> None:
        """Call ``seen`` whenever a frame of at most ``max_bytes`` that ``matches`` is read, before it is
        received (in websockets' read callback: ``seen`` must not block; what it raises is logged and
        dropped, so the read goes on); one watch at a time."""
        ws = self._ws
        if not isinstance(ws, _WatchedConnection):
            return

        def on_frame(frame: Frame) -> None:
            data = frame.data
            if len(data) <= max_bytes and frame.opcode in (Opcode.TEXT, Opcode.BINARY) and matches(bytes(data)):
                try:
                    seen()
                except Exception:
                    log.exception("a frame watcher failed")

        ws.on_frame = on_frame

    def queued_where(self, matches: FrameTest, max_bytes: int, max_frames: int) -> int | None:
        """How many frames wait ahead of the first of the next ``max_frames`` that websockets read and
        :meth:`recv` did not take, of at most ``max_bytes``, that ``matches``; None if none does.
        Larger frames are passed over by their length, so a look costs at most ``max_frames`` checks."""
        for ahead, frame in enumerate(itertools.islice(self._frames or (), max_frames)):
            data = frame.data
            if len(data) <= max_bytes and frame.opcode in (Opcode.TEXT, Opcode.BINARY) and matches(bytes(data)):
                return ahead
        return None

    async def recv(self) -> str:
        if (text := self.try_recv()) is not None:
            return text
        self.waits += 1
        try:
            # as bytes: websockets would close with 1007 on a text frame that is not UTF-8, where a frame
            # however malformed ends no session; its bad bytes are read as U+FFFD, as a binary frame's are
            frame = await self._ws.recv(decode=False)
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None
        except RuntimeError:  # another coroutine reads: after close() began, its drain; the connection is ending
            if not self._closing:
                raise
            raise ConnectionClosed(1000, "closed by the client") from None
        return self._scrub(frame.decode("utf-8", "replace"))

    def _scrub(self, text: str) -> str:
        """The frame with our own token replaced, should a server echo it (e.g. in an error message)."""
        return scrub(text, self._token)

    async def ping(self) -> None:
        """A WebSocket ping; returns when the server's pong arrives."""
        try:
            pong = await self._ws.ping()
            await pong
        except WsConnectionClosed as exc:
            raise self._closed(exc) from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        # what the server still sends (a reply being streamed) is read and dropped while the close
        # handshake runs: websockets stops reading once enough messages wait unread, and the
        # server's close frame would wait behind them until the close timed out
        self._closing = True
        drain = asyncio.ensure_future(self._discard_incoming())
        try:
            await self._ws.close(code, reason)
        finally:
            drain.cancel()
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason

    async def _discard_incoming(self) -> None:
        try:
            while True:
                await self._ws.recv()
        except (WsConnectionClosed, RuntimeError):  # closed; or a reader of the session's still at it
            return

    def abort(self) -> None:
        """Drop the socket at once, with no close handshake: a peer that stops answering keeps a close waiting
        for websockets' own timeout, and what waits in :meth:`recv` with it."""
        self._ws.transport.abort()

    def _closed(self, exc: WsConnectionClosed) -> ConnectionClosed:
        frame = exc.rcvd or exc.sent
        code = frame.code if frame is not None else 1006
        reason = self._scrub(frame.reason) if frame is not None else "no close frame"
        self.close_code, self.close_reason = code, reason
        log.info("connection to %s closed: %s %s", redact_url(self.url), code, redact(reason))
        return ConnectionClosed(code, reason)


def _date_of(ws: ClientConnection) -> float | None:
    """The handshake response's ``Date`` (the server's wall clock, to the second), or None."""
    response = getattr(ws, "response", None)
    value = response.headers.get("Date") if response is not None else None
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
