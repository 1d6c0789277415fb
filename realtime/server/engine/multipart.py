"""``multipart/form-data`` bodies, as the SDK's ``calls.create(sdp=…, session=…)`` sends them.

Only what the calls endpoint needs: named parts with a body, no files on disk, no
nested multiparts. The body is already bounded by the HTTP reader (1 MiB), and the
work is one pass over it. A malformed body raises ``ValueError`` with a short reason.
"""

from __future__ import annotations

__all__ = ["boundary_of", "parse_form"]

MAX_PARTS = 8


def boundary_of(content_type: str) -> str:
    """The ``boundary`` parameter of a ``multipart/form-data`` content type."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "boundary":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            if 0 < len(value) <= 200:
                return value
    raise ValueError("multipart/form-data without a boundary")


def parse_form(body: bytes, boundary: str) -> dict[str, bytes]:
    """The parts of a form by name (the first part of a name wins)."""
    delimiter = b"--" + boundary.encode("latin-1")
    chunks = body.split(delimiter)
    if len(chunks) < 3:
        raise ValueError("no parts between the boundaries")
    if not chunks[-1].startswith(b"--"):
        raise ValueError("the closing boundary is missing")
    if len(chunks) - 2 > MAX_PARTS:
        raise ValueError(f"more than {MAX_PARTS} parts")
    parts: dict[str, bytes] = {}
    for chunk in chunks[1:-1]:
        if not chunk.startswith(b"\r\n") or not chunk.endswith(b"\r\n"):
            raise ValueError("a part is not delimited by CRLF")
        head, sep, content = chunk[2:-2].partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("a part has no header block")
        name = _field_name(head.decode("latin-1"))
        parts.setdefault(name, content)
    return parts


def _field_name(head: str) -> str:
    for line in head.split("\r\n"):
        header, _, value = line.partition(":")
        if header.strip().lower() != "content-disposition":
            continue
        for param in value.split(";")[1:]:
            key, _, raw = param.strip().partition("=")
            if key.strip().lower() == "name":
                return raw.strip().strip('"')
    raise ValueError("a part has no Content-Disposition name")
