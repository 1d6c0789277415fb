"""WebRTC signaling: the SDP offer POSTed to ``/v1/realtime/calls`` (docs/protocol.md §2).

``POST {base}/realtime/calls`` with ``Content-Type: application/sdp`` and
``Authorization: Bearer <key or ek_…>``; the answer is ``201`` with the SDP answer as
the body and a ``Location`` header whose last path segment is the call id (its query and
fragment are no part of it; :func:`call_id_problem` says what makes an id unusable). The
request runs with ``urllib`` on a thread of its own (no HTTP client dependency), is broken off at once
when the caller gives up, and follows no redirect (:mod:`voxline.realtime.transports.http`), so the
token never reaches another host.
Failures are one-line :class:`~voxline.realtime.errors.ConnectionFailed` errors naming the
HTTP status, never the token.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from voxline.base.redaction import redact, scrub

from ..errors import ConfigurationError, ConnectionFailed
from .failures import error_detail, token_refused
from .http import post_async, split_userinfo

__all__ = ["EVENTS_LABEL", "MAX_CALL_ID", "Answer", "call_id_problem", "calls_url", "post_offer"]

EVENTS_LABEL = "oai-events"
"""The label of the data channel that carries the JSON events."""

MAX_CALL_ID = 128
"""The longest call id taken (the service's are ``rtc_`` and a few dozen characters)."""

@dataclass(frozen=True, slots=True)
class Answer:
    """The service's reply to an offer."""

    sdp: str
    call_id: str


def calls_url(base: str, *, model: str | None = None) -> str:
    """``{base}/realtime/calls`` over http(s); ws(s) bases are mapped like the SDK maps them back.

    ``base`` may be the API base (``https://api.openai.com/v1``, ``ws://127.0.0.1:8765/v1``),
    a ``…/realtime`` URL or the calls URL itself. ``?model=`` is added when given. Userinfo
    (``user:key@``) is dropped: the key goes in the one ``Authorization`` header.
    """
    parts = urllib.parse.urlsplit(split_userinfo(base)[0])
    scheme = {"http": "http", "https": "https", "ws": "http", "wss": "https"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ConfigurationError(f"not an HTTP or WebSocket URL: {base!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/realtime"):
        path += "/calls"
    elif not path.endswith("/realtime/calls"):
        path += "/realtime/calls"
    query = dict(urllib.parse.parse_qsl(parts.query))
    if model and "model" not in query:
        query["model"] = model
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, urllib.parse.urlencode(query), ""))


async def post_offer(url: str, token: str, offer_sdp: str, *, timeout: float = 10.0) -> Answer:
    """POST the offer; return the answer and call id, or raise ConnectionFailed. Cancelled, the request is broken
    off at once (:func:`~voxline.realtime.transports.http.post_async`)."""
    reply = await post_async(url, token, offer_sdp.encode("utf-8"), "application/sdp", timeout=timeout)
    if reply.redirected:
        raise ConnectionFailed(
            f"{url} answered the WebRTC offer with a redirect (HTTP {reply.status}); not followed with the key"
        )
    if reply.status >= 400:
        detail = error_detail(reply.body)
        hint = f" ({token_refused(token)})" if reply.status in (401, 403) else ""
        raise ConnectionFailed(f"{url} refused the WebRTC offer: HTTP {reply.status}{hint}{detail}", reply.status)
    body = reply.body.decode("utf-8", "replace")
    call_id = _last_segment(reply.location, url)
    if reply.status != 201 or not body.startswith("v=") or not call_id:
        raise ConnectionFailed(
            f"{url} answered the WebRTC offer with HTTP {reply.status} but no SDP answer and call id"
        )
    return Answer(body, call_id)


def _last_segment(location: str, url: str) -> str:
    """The last segment of ``location``'s path: the call id; ``""`` when it names the calls URL ``url`` itself."""
    try:
        path = urllib.parse.urlsplit(location).path.rstrip("/")
    except ValueError:  # an address no URL parser takes
        return ""
    return "" if path == urllib.parse.urlsplit(url).path.rstrip("/") else path.rsplit("/", 1)[-1]


def call_id_problem(call_id: str, token: str) -> str | None:
    """What makes the id a server gave its call (sent with ``token``) unusable, or ``None``: ids are printable
    ASCII without spaces, at most :data:`MAX_CALL_ID` long, and hold no key (an id is shown, logged and passed on
    to a backend as a sideband's ``call_id``)."""
    if not call_id:
        return "it is empty"
    if len(call_id) > MAX_CALL_ID:
        return f"it is {len(call_id)} characters long; at most {MAX_CALL_ID} are taken"
    if not all("!" <= c <= "~" for c in call_id):
        return "it holds a space, a control character or one that is not ASCII"
    if scrub(call_id, token.strip()) != call_id or redact(call_id) != call_id:
        return "it holds a key"
    return None
