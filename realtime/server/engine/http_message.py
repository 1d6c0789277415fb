"""Plain HTTP messages on the server's port, sans I/O: a request read from bytes, a response written as bytes.

The WebSocket library parses only ``GET`` handshakes, so a request with another method is read
here: its head up to :data:`MAX_HEAD` bytes, with CRLF line endings (a bare LF is refused at
once rather than waited on), then a body of ``Content-Length`` bytes up to :data:`MAX_BODY`.
``Expect: 100-continue`` is honoured (:attr:`RequestHead.expects_continue`: the connection
answers ``100 Continue`` before the body); any other expectation is refused with 417. Methods
are case-sensitive, as HTTP has them: ``post`` is not ``POST``. A head is read as strictly as
HTTP/1.1 asks (RFC 9112): a target of visible ASCII, version 1.0 or 1.1, a Host in 1.1, at most
:data:`MAX_HEADERS` header lines, each ``name: value`` with no space before the colon, no folded
line and no control character; anything else is refused, never guessed at (a folded
``Authorization`` must not count as one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec

__all__ = [
    "CONTINUE",
    "MAX_BODY",
    "MAX_HEAD",
    "MAX_HEADERS",
    "SINGLE_HEADERS",
    "DuplicateHeader",
    "HttpRequest",
    "HttpResponse",
    "RefusedHead",
    "RequestHead",
    "head_end",
    "parse_head",
    "parse_request",
]

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

SINGLE_HEADERS = ("authorization", "content-length", "content-type", "host")
"""Headers that must come at most once (RFC 9110 §5.3): a repeat is refused, never resolved."""

_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}")  # a token (RFC 9110 §5.6.2), kept short
_TARGET = re.compile(r"[\x21-\x7e]+")  # visible ASCII: other bytes are percent-encoded (RFC 9112 §3.2)
_VERSIONS = ("HTTP/1.0", "HTTP/1.1")
_FIELD = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")  # name, no space before the colon
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # controls but HTAB (RFC 9110 §5.5)
MAX_HEADERS = 128
"""Header lines a head may have (as many as the WebSocket handshake takes)."""
_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 411: "Length Required",
            413: "Content Too Large", 417: "Expectation Failed", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


class RefusedHead(ValueError):
    """A request whose head says what the server does not take: answered with ``status`` and ``spec``, never read on."""

    def __init__(self, status: int, spec: ErrorSpec) -> None:
        super().__init__(spec.message)
        self.status, self.spec = status, spec


class DuplicateHeader(RefusedHead):
    """A request repeats one of :data:`SINGLE_HEADERS`; ``name`` is its canonical spelling."""

    def __init__(self, name: str) -> None:
        super().__init__(400, errors.duplicate_header(name))
        self.name = name


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str] = field(repr=False)  # Authorization among them
    body: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A response to a plain HTTP request: a JSON object, or raw bytes with their content type."""

    status: int
    body: dict[str, Any] | bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self, *, head_only: bool = False) -> bytes:
        """The response's bytes; ``head_only`` for a ``HEAD`` request, which is told the length but sent no body."""
        payload = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode("utf-8")
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(payload)}",
            *(f"{name}: {value}" for name, value in self.headers.items()),
            "Connection: close",
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else payload)


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request's head, read whole; its body follows at ``body_at`` and is ``length`` bytes long."""

    method: str
    path: str
    query: str
    headers: dict[str, str] = field(repr=False)
    length: int
    body_at: int
    version: str = "HTTP/1.1"

    @property
    def expects_continue(self) -> bool:
        """The client holds its body back for a ``100 Continue`` (an HTTP/1.1 client only: 1.0 has none)."""
        return self.version != "HTTP/1.0" and self.headers.get("expect", "").lower() == "100-continue"

    def request(self, data: bytes) -> HttpRequest | None:
        """The whole request, once ``data`` holds its body; ``None`` before."""
        body = data[self.body_at: self.body_at + self.length]
        if len(body) < self.length:
            return None
        return HttpRequest(self.method, self.path, self.query, self.headers, body)


def head_end(data: bytes | bytearray) -> int:
    """Where the head in ``data`` ends (its blank line's ``CRLF CRLF``), ``-1`` while it is not whole.

    ``ValueError`` for a line ended by a bare LF (that head would never end) and for a head past
    :data:`MAX_HEAD`; the bytes are looked at only up to the head's end, a body may hold anything.
    """
    end = data.find(b"\r\n\r\n")
    head = data[:end] if end >= 0 else data
    if head.count(b"\n") != head.count(b"\r\n"):
        raise ValueError("line endings must be CRLF")
    if end < 0 and len(data) > MAX_HEAD:
        raise ValueError("request head too large")
    return end


def parse_head(data: bytes | bytearray) -> RequestHead | None:
    """The request head at the start of ``data``, ``None`` while it is not whole; ``ValueError`` if malformed
    (:class:`RefusedHead` for one the server reads but does not take)."""
    end = head_end(data)
    if end < 0:
        return None
    if end > MAX_HEAD:  # a head that came whole in one read is held to the same bound
        raise ValueError("request head too large")
    lines = data[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or _METHOD.fullmatch(parts[0]) is None or _TARGET.fullmatch(parts[1]) is None:
        raise ValueError("malformed request line")
    method, target, version = parts
    if version not in _VERSIONS:
        raise ValueError("malformed request line" if not version.startswith("HTTP/") else
                         "the HTTP version must be HTTP/1.1 or HTTP/1.0")
    if len(lines) - 1 > MAX_HEADERS:
        raise ValueError(f"more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):  # obsolete line folding: a continuation would be read as a header of its own
            raise ValueError("a header line may not be folded")
        field_ = _FIELD.fullmatch(line)
        if field_ is None:
            raise ValueError("malformed header line")
        key, value = field_.group(1).lower(), field_.group(2)
        if _BAD_VALUE.search(value):
            raise ValueError("a header value may not hold control characters")
        if key in headers and key in SINGLE_HEADERS:
            raise DuplicateHeader("-".join(part.capitalize() for part in key.split("-")))
        headers[key] = value
    if version == "HTTP/1.1" and "host" not in headers:
        raise ValueError("an HTTP/1.1 request needs a Host header")
    if "transfer-encoding" in headers:  # a chunked body has no length to read up to
        raise RefusedHead(411, ErrorSpec("Transfer-Encoding is not supported: send the body with a Content-Length.",
                                         "length_required"))
    if headers.get("expect", "100-continue").lower() != "100-continue":
        raise RefusedHead(417, ErrorSpec("The only expectation taken is 100-continue.", "expectation_failed"))
    raw_length = headers.get("content-length", "0")
    if not (raw_length.isascii() and raw_length.isdigit()):  # int() would take "0_2", " 12" or "+3"; "" is no number
        raise ValueError("Content-Length is not a number")
    length = int(raw_length)
    if length > MAX_BODY:
        raise RefusedHead(413, ErrorSpec(f"The request body is {length} bytes; at most {MAX_BODY} are taken.",
                                         "request_too_large"))
    path, _, query = target.partition("?")
    return RequestHead(method, path, query, headers, length, end + 4, version)


def parse_request(data: bytes) -> HttpRequest | None:
    """A complete request from ``data``, ``None`` if more bytes are needed; ``ValueError`` as :func:`parse_head`."""
    head = parse_head(data)
    return None if head is None else head.request(data)
