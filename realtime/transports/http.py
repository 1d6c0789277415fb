"""One HTTP POST with a bearer token, for the calls endpoint and ``client_secrets``.

``urllib`` follows a ``301``/``302``/``303`` answer to a POST by sending a GET, with every
header of the original request, ``Authorization`` included, to whatever host the
``Location`` names. These endpoints never redirect, so here no redirect is followed at all:
the answer is returned as it came, and the caller reports the status. The token is
registered for redaction before it is sent.

``http.client`` hands back a body cut short by the connection's end, before its ``Content-Length``,
as if it were whole; here that answer is a one-line :class:`ConnectionFailed` saying how much of it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.client
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from voxline.base.redaction import install_log_redaction, register_secret, register_url_secrets
from voxline.base.urls import is_loopback_url

from ..errors import ConfigurationError, ConnectionFailed
from .failures import connect_failure

__all__ = ["REDIRECTS", "HttpAnswer", "bearer_token", "check_http_url", "post", "post_async", "split_userinfo"]

REDIRECTS = frozenset({300, 301, 302, 303, 307, 308})
MAX_BODY = 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A reply of any status: its code, ``Location`` (if any) and body (at most 1 MiB)."""

    status: int
    body: bytes = field(repr=False)
    location: str = ""

    @property
    def redirected(self) -> bool:
        return self.status in REDIRECTS


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError, which post() returns


install_log_redaction()


def split_userinfo(url: str) -> tuple[str, str]:
    """``url`` without its userinfo, and the key that userinfo carried (``""`` if none).

    ``wss://user:KEY@host/v1`` → ``("wss://host/v1", "KEY")``; a lone ``KEY@host`` gives ``KEY``.
    A transport connects to the first and sends one ``Authorization: Bearer`` header: the
    configured key if there is one, else this one. (Left in the URL, websockets would send a
    second, ``Basic``, ``Authorization`` header made of it.)
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url, ""
    if "@" not in parts.netloc:
        return url, ""
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    register_url_secrets(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), urllib.parse.unquote(password or user)


def bearer_token(token: str, url: str) -> str:
    """``token`` as it goes in ``Authorization: Bearer``, registered for redaction with ``url``'s secrets.

    Whitespace around it is dropped (HTTP drops it too, so the trimmed key is what a server
    sees and may echo back); a control character inside (a pasted line break), which would end
    the header and start another, or a character that is not ASCII, is refused in one line that
    does not show the key.
    """
    register_url_secrets(url)
    stripped = token.strip()
    register_secret(token)
    register_secret(stripped)
    if any(ord(c) < 32 or ord(c) == 127 for c in stripped):
        raise ConfigurationError("the API key holds a control character (a line break pasted with it?); set it again")
    if not stripped.isascii():  # keys are ASCII; a header would carry any other character mangled, or not at all
        raise ConfigurationError("the API key holds a character that is not ASCII (a quote or dash changed by an "
                                 "editor?); set it again")
    return stripped


def check_http_url(url: str, what: str = "URL", *, named: str = "an http:// or https:// URL") -> str:
    """``url`` if it is a usable http(s) URL, else a one-line :class:`ConfigurationError` (saying
    ``what`` must be ``named``: a caller that turns other schemes into these names them too)."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # a port that is not a number, or out of range, raises here
    except ValueError as exc:
        raise ConfigurationError(f"invalid {what} {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{what} must be {named}, not {url!r}")
    return url


def post(url: str, token: str, body: bytes, content_type: str, *, timeout: float) -> HttpAnswer:
    """POST ``body`` to ``url`` with ``Authorization: Bearer <token>``; blocking, for ``timeout`` seconds in all
    (and half a second, for a socket's own timeout to say what it was waiting for).

    Raises :class:`ConfigurationError` for a URL that is not http(s) and
    :class:`ConnectionFailed` when no answer came (refused, unreachable, timed out). The exchange
    runs on a daemon thread of its own: a server that trickles its answer a byte at a time (each
    read within the socket's timeout) is given up on at the deadline, and its socket shut, which
    ends the thread's read at once.
    """
    exchange = _Exchange(url, token, body, content_type, timeout)
    exchange.thread.start()
    exchange.thread.join(timeout + _GRACE_S)
    return exchange.answer()


async def post_async(url: str, token: str, body: bytes, content_type: str, *, timeout: float) -> HttpAnswer:
    """:func:`post` awaited: the exchange runs on its daemon thread while the loop waits. A wait cancelled (the
    caller gave up: a session closed while connecting) shuts the exchange's socket at once, so neither the thread
    nor the request carrying the key outlives the caller, and no executor thread waits for it (the loop's closing
    and the interpreter's exit join those)."""
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(ended.set)

    exchange = _Exchange(url, token, body, content_type, timeout, wake)
    exchange.thread.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout + _GRACE_S):
                await ended.wait()
    except BaseException:  # cancelled: the thread's read ends as its socket is shut
        exchange.connections.shut()
        raise
    # late, answer() looks for an outcome before it shuts the socket: shut first, the read it ends could still
    # hand in what it had as the answer (or as one cut off) ahead of the deadline's failure
    return exchange.answer()


class _Exchange:
    """One request on a daemon thread of its own (not started), its outcome, and its connections for whoever gives
    up on it; ``ended`` is called on that thread once it is over, whatever the outcome."""

    def __init__(self, url: str, token: str, body: bytes, content_type: str, timeout: float,
                 ended: Callable[[], None] = lambda: None) -> None:
        url, userinfo = split_userinfo(url)
        token = bearer_token(token or userinfo, url)
        self.url = check_http_url(url)
        self.timeout = timeout
        self.outcome: list[HttpAnswer | ConfigurationError | ConnectionFailed] = []
        self.connections = _Connections()
        self._ended = ended
        self.thread = threading.Thread(target=self._run, args=(token, body, content_type), name="voxline-http-post",
                                       daemon=True)

    def _run(self, token: str, body: bytes, content_type: str) -> None:
        try:
            _exchange(self.url, token, body, content_type, self.timeout, self.connections, self.outcome)
        finally:
            self._ended()

    def answer(self) -> HttpAnswer:
        """The answer, or the failure raised; none yet, it is given up on (its sockets shut)."""
        if not self.outcome:
            self.connections.shut()
            raise ConnectionFailed(f"{self.url} sent no complete answer within {self.timeout:g} s")
        match self.outcome[0]:
            case HttpAnswer() as answer:
                return answer
            case failure:
                raise failure


_GRACE_S = 0.5


class _Connections:
    """The connections one exchange opened, for whoever gives up on it to shut their sockets (one connected after
    that is shut as it connects)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connected: list[socket.socket] = []
        self._shut = False

    def connected(self, sock: socket.socket) -> None:
        with self._lock:
            self._connected.append(sock)
            shut = self._shut
        if shut:
            _shut(sock)

    def shut(self) -> None:
        """Shut every socket connected so far; a read waiting on one ends at once."""
        with self._lock:
            self._shut = True
            sockets = list(self._connected)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Recorded:
    """A connection that tells ``recorded_by`` of its socket once connected."""

    def __init__(self, *args: Any, recorded_by: _Connections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recorded_by = recorded_by

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self._recorded_by.connected(self.sock)  # type: ignore[attr-defined]


class _Connection(_Recorded, http.client.HTTPConnection):
    pass


class _TlsConnection(_Recorded, http.client.HTTPSConnection):
    pass


class _Opening(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's http and https handlers (TLS verified as theirs are), each connection recorded."""

    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Connection, recorded_by=self._connections), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_TlsConnection, recorded_by=self._connections), req)


def _opener(url: str, connections: _Connections) -> urllib.request.OpenerDirector:
    """No redirect followed; for a server on this machine, never through a proxy the environment names (which would
    be handed the key); each connection recorded in ``connections``."""
    handlers: list[Any] = [_NoRedirect, _Opening(connections)]
    if is_loopback_url(url):
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _exchange(url: str, token: str, body: bytes, content_type: str, timeout: float, connections: _Connections,
              outcome: list[HttpAnswer | ConfigurationError | ConnectionFailed]) -> None:
    """The request and its answer, or why there is none, appended to ``outcome`` (whatever is raised: a thread's
    exception would be printed with its traceback)."""
    failure: ConfigurationError | ConnectionFailed
    began = False  # the answer's head came
    try:
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"}
        )
        with _opener(url, connections).open(request, timeout=timeout) as response:
            began = True
            outcome.append(HttpAnswer(response.status, _body(response), response.headers.get("Location", "")))
            return
    except urllib.error.HTTPError as exc:
        try:
            with exc:
                outcome.append(HttpAnswer(exc.code, _body(exc),
                                          exc.headers.get("Location", "") if exc.headers else ""))
                return
        except (OSError, http.client.HTTPException):  # its body cut off, or given up on while it came
            failure = ConnectionFailed(f"{url} answered HTTP {exc.code} and broke off its body")
    except urllib.error.URLError as exc:  # the connect or the request's send failed
        cause = exc.reason if isinstance(exc.reason, BaseException) else exc
        failure = ConnectionFailed(connect_failure(url, cause))
    except http.client.IncompleteRead as exc:  # the answer's body cut off (_body), or a chunked one
        failure = ConnectionFailed(_cut_off(url, exc))
    except (ValueError, http.client.InvalidURL) as exc:
        failure = ConfigurationError(f"invalid URL {url!r}: {exc}")
    except http.client.HTTPException as exc:  # a peer that does not speak HTTP, or a socket shut at the deadline
        failure = ConnectionFailed(f"{url} sent no valid HTTP answer: {type(exc).__name__}")
    except TimeoutError:  # connected and sent, then no answer: urllib wraps only the connect's and send's errors
        failure = ConnectionFailed(f"{url} began its answer but sent no more of it within {timeout:g} s" if began
                                   else f"{url} took the request but sent no answer within {timeout:g} s")
    except OSError as exc:
        failure = ConnectionFailed(connect_failure(url, exc))
    except BaseException as exc:  # noqa: BLE001 - a bug of ours or the library's: said, not printed by the thread
        failure = ConnectionFailed(f"the POST to {url} failed: {type(exc).__name__}")
    # made outside the handler, so the library's exception (which may hold the request, its
    # headers, or a body that echoes the key) is not kept as this one's __context__ either
    outcome.append(failure)


def _body(response: Any) -> bytes:
    """At most :data:`MAX_BODY` bytes of ``response``'s body (an answer, or an ``HTTPError`` standing for one);
    :class:`http.client.IncompleteRead` when the connection ended before its ``Content-Length`` did, which
    ``read`` does not raise itself (what is left of the length after the read says so; one over the cap is only
    cut at it, and a chunked answer, which has no length, raises its own)."""
    body: bytes = response.read(MAX_BODY)
    left = getattr(response, "length", None)
    if left and len(body) < MAX_BODY:
        raise http.client.IncompleteRead(body, left)
    return body


def _cut_off(url: str, exc: http.client.IncompleteRead) -> str:
    """One line for an answer whose body the connection's end cut off."""
    if exc.expected is None:  # chunked: no length to say, and the parts of a chunk read are not counted
        return f"the answer from {url} ended before its chunked body did"
    return f"the answer from {url} ended after {len(exc.partial)} of {len(exc.partial) + exc.expected} bytes"
