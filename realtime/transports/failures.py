"""One line saying why a connection could not be made: HTTP status, TLS, DNS, refused, timeout.

Shared by the WebSocket transport and WebRTC signalling. The line names the URL and what
happened, never the token.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import urllib.parse

from voxline.base.shown import clip, printable
from voxline.base.urls import LOCAL_KEY

__all__ = ["MESSAGE_CHARS", "URL_CHARS", "connect_failure", "error_detail", "http_status", "token_refused"]

MESSAGE_CHARS = 300  # of a server's error message kept in an error (a body may be megabytes long)
URL_CHARS = 200  # of a URL an error names (a call id of 20,000 characters makes a URL as long)

_KEY_PARAMETERS = {"api_key", "apikey", "key", "token", "access_token", "bearer"}
_STATUS_LINE = re.compile(r"HTTP/\d(?:\.\d)? (\d{3})")


def _at(url: str) -> str:
    """``url`` as an error names it: on one line, control characters escaped, cut to :data:`URL_CHARS`."""
    return printable(clip(url, URL_CHARS, flat=True))


def http_status(url: str, status: int, token: str = "") -> str:
    """What an HTTP status answered to a Realtime connect with ``token`` means."""
    shown = _at(url)
    if status in (401, 403):
        names = {name.lower().replace("-", "_") for name, _ in urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)}
        if names & _KEY_PARAMETERS:  # a key in the query string is never sent as the bearer token
            return (f"HTTP {status} from {shown}: the token was refused (a key in the URL's query is not the "
                    "token; give it as OPENAI_API_KEY or as user:KEY@ in the URL)")
        return f"HTTP {status} from {shown}: {token_refused(token)}"
    if status == 404 and "call_id" in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query):
        return f"HTTP 404 from {shown}: no such call (it ended, or was never made)"  # the sideband's call
    if status in (404, 405, 426) or 300 <= status < 400:
        return f"HTTP {status} from {shown} — not a Realtime endpoint (check the URL; it ends in /v1)"
    return f"HTTP {status} from {shown}"


def error_detail(body: bytes) -> str:
    """``: <message>`` from a JSON error body (``{"error": {"message": …}}``), redacted, on one line and at most
    :data:`MESSAGE_CHARS` long; empty if there is none."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return ""
    return f": {printable(clip(str(message), MESSAGE_CHARS, flat=True))}" if message else ""


def token_refused(token: str) -> str:
    """What a 401 or 403 says of ``token``: :data:`~voxline.base.urls.LOCAL_KEY`, sent for want of a key, means the
    server asks for one; any other was refused."""
    if token == LOCAL_KEY:
        return "this server asks for an API key, and none was given: set VOXLINE_API_KEY or OPENAI_API_KEY"
    return "the token was refused"


def connect_failure(url: str, exc: BaseException, token: str = "") -> str:
    """The one-line reason ``exc`` (raised while connecting to ``url`` with ``token``) stands for."""
    host = _at(urllib.parse.urlsplit(url).hostname or url)
    at = _at(url)
    for cause in _chain(exc):
        match cause:
            case socket.gaierror():
                return f"cannot connect to {at}: DNS cannot resolve {host} ({cause.strerror or cause})"
            case ssl.SSLCertVerificationError():
                return f"cannot connect to {at}: TLS certificate of {host} not accepted ({cause.verify_message or cause.reason})"
            case ssl.SSLError():
                hint = "; is it a plain ws:// or http:// server?" if cause.reason == "WRONG_VERSION_NUMBER" else ""
                return f"cannot connect to {at}: TLS handshake with {host} failed ({cause.reason or cause}{hint})"
            case ConnectionRefusedError():
                return f"cannot connect to {at}: connection refused (nothing listens there)"
            case TimeoutError():
                # a plain server takes a TLS hello for the start of a request and waits for the rest of it
                hint = ("; if it is a plain ws:// server, such as `voxline serve`, use ws://"
                        if urllib.parse.urlsplit(url).scheme in ("wss", "https") else "")
                return f"cannot connect to {at}: no answer in time (connect timed out{hint})"
        if (found := _STATUS_LINE.search(str(cause))) is not None:
            return http_status(url, int(found.group(1)), token)  # a plain HTTP server, e.g. HTTP/1.0 404
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc) or type(exc).__name__)
    return f"cannot connect to {at}: {reason}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    if isinstance(exc, OSError) and isinstance(exc.args[0] if exc.args else None, BaseException):
        seen.append(exc.args[0])  # urllib's URLError carries its reason as an argument
    return seen
