"""Opening GPT-Live connections: the primary WebSocket, a fork of a stored session, a sideband, WebRTC.

The URLs are the service's (docs/protocol.md §14): ``/v1/live/sessions`` (no query
string: the model goes in ``session.start``), ``/v1/live/sessions/{id}/fork`` and
``/v1/live/sessions/{id}/attach`` over WebSocket, and ``POST /v1/live/sessions`` with a JSON body
``{"session": …, "transport": {"type": "webrtc", "sdp": …}}`` whose answer carries the session id
and the SDP answer. A connection is a :class:`~voxline.realtime.connection.RealtimeConnection`
pumping a :class:`~.protocol.LiveProtocol`: the connection only moves frames between a transport and
a core's ``receive`` / ``events`` / ``data_to_send``, and the Live core has those.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, cast

from ..connection import RealtimeConnection, WireObserver
from ..errors import ConfigurationError, ConnectionFailed
from ..transports.failures import error_detail, token_refused
from ..transports.http import post_async, split_userinfo
from ..transports.rtc_signaling import Answer
from .protocol import LiveProtocol

__all__ = ["connect_live", "live_connection", "live_http_url", "live_url", "post_live_offer"]


def _base(base: str) -> tuple[str, str, str]:
    parts = urllib.parse.urlsplit(split_userinfo(base)[0])
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise ConfigurationError(f"not a WebSocket or HTTP URL: {base!r}")
    path = parts.path.rstrip("/")
    for tail in ("/realtime", "/live/sessions"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    return parts.scheme, parts.netloc, path


def live_url(base: str, *, session_id: str | None = None, action: str | None = None) -> str:
    """``ws(s)://…/v1/live/sessions[/{id}/{fork|attach}]`` from an API base (http(s) or ws(s))."""
    scheme, netloc, path = _base(base)
    ws = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    path += "/live/sessions"
    if session_id is not None:
        path += f"/{urllib.parse.quote(session_id, safe='')}/{action or 'attach'}"
    return urllib.parse.urlunsplit((ws, netloc, path, "", ""))


def live_http_url(base: str, *, session_id: str | None = None, action: str | None = None) -> str:
    """The same path over http(s), for ``POST /v1/live/sessions`` (WebRTC) and its fork."""
    url = live_url(base, session_id=session_id, action=action)
    return url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)


def live_connection(transport: Any, *, started: bool = False, fork_of: str | None = None,
                    on_wire: WireObserver | None = None) -> RealtimeConnection:
    """A connection pumping a fresh Live core over ``transport`` (see the module docstring)."""
    protocol = LiveProtocol(started=started)
    protocol.fork_of = fork_of
    return RealtimeConnection(transport, cast(Any, protocol), on_wire=on_wire)


async def connect_live(base_url: str, token: str, *, fork_of: str | None = None, attach: str | None = None,
                       on_wire: WireObserver | None = None, **options: Any) -> RealtimeConnection:
    """Open a Live WebSocket: a new session (``session.start`` first), a fork, or a sideband (``attach``)."""
    from ..transports.websocket import WebSocketTransport

    if fork_of is not None and attach is not None:
        raise ConfigurationError("a Live connection forks a stored session or attaches to a running one, not both")
    session_id = fork_of or attach
    url = live_url(base_url, session_id=session_id, action="fork" if fork_of else "attach")
    transport = await WebSocketTransport.connect(base_url, token, url=url, **options)
    return live_connection(transport, started=attach is not None, fork_of=fork_of, on_wire=on_wire)


async def post_live_offer(url: str, token: str, offer_sdp: str, session: dict[str, Any], *,
                          timeout: float = 10.0) -> Answer:
    """``POST /v1/live/sessions`` with the session and the offer; the answer and the new session's id."""
    body = json.dumps({"session": session, "transport": {"type": "webrtc", "sdp": offer_sdp}}).encode()
    reply = await post_async(url, token, body, "application/json", timeout=timeout)
    if reply.redirected:
        raise ConnectionFailed(f"{url} answered with a redirect (HTTP {reply.status}); not followed with the key")
    if reply.status >= 400:
        hint = f" ({token_refused(token)})" if reply.status in (401, 403) else ""
        raise ConnectionFailed(f"{url} refused the Live WebRTC offer: HTTP {reply.status}{hint}"
                               f"{error_detail(reply.body)}", reply.status)
    try:
        answer = json.loads(reply.body)
        sdp, session_id = answer["transport"]["sdp"], answer["session"]["id"]
    except (ValueError, KeyError, TypeError):
        raise ConnectionFailed(f"{url} answered the Live WebRTC offer with no session id and SDP answer") from None
    if not isinstance(sdp, str) or not isinstance(session_id, str) or not sdp.startswith("v="):
        raise ConnectionFailed(f"{url} answered the Live WebRTC offer with no session id and SDP answer")
    return Answer(sdp, session_id)
