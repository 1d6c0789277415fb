"""Raw HTTP/1.1 requests to the local server over a plain TCP connection, for tests that send what no client
library would: heads written byte for byte, and the answer read to the connection's end."""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["exchange", "parse_http", "post_request", "upgrade_request"]


def parse_http(raw: bytes) -> tuple[int, dict[str, Any] | None, bytes]:
    """The status, the JSON body (``None`` if it is none) and the raw body of an answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    return status, payload, body


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, Any] | None, bytes]:
    """Send ``request`` to 127.0.0.1:``port`` and read the answer until the server closes (at most 10 s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert raw, "the server dropped the request without an answer"
    return parse_http(raw)


def post_request(path: str, body: bytes, *, authorization: bytes, content_type: bytes = b"application/json") -> bytes:
    """A well-formed ``POST`` of ``body`` to ``path``."""
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + authorization
            + b"\r\nContent-Type: " + content_type + b"\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)


def upgrade_request(authorization: bytes, target: bytes = b"/v1/realtime?model=gpt-realtime") -> bytes:
    """A WebSocket opening handshake for ``target``."""
    return (b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Authorization: " + authorization + b"\r\n\r\n")
