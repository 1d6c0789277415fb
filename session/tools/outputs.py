"""The text of a ``function_call_output`` item: results encoded once, errors as one-line JSON.

The output of a call is always a string (docs/protocol.md §9). A string result is sent as is;
anything else is JSON-encoded exactly once, so a result is never a JSON string inside a
JSON string. Failures go back to the model as ``{"error":"<one line>"}`` with secrets
redacted and no traceback.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from pydantic import ValidationError

from voxline.realtime.errors import ToolError, redact

__all__ = [
    "describe_exception",
    "describe_invalid",
    "encode_output",
    "error_output",
    "one_line",
]

_MAX_MESSAGE = 500


def one_line(text: str, limit: int = _MAX_MESSAGE) -> str:
    """Collapse whitespace (newlines included), redact secrets and cap the length."""
    flat = redact(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_output(message: str) -> str:
    """The output text for a call that failed: ``{"error":"<message>"}``."""
    return json.dumps({"error": one_line(message)}, separators=(",", ":"), ensure_ascii=False)


def describe_exception(exc: BaseException) -> str:
    """``"Type: message"``, or the type's name alone when the message is empty or ``str()`` fails."""
    name = type(exc).__name__
    try:
        detail = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # the exception's own __str__ is user code too
        return name
    return f"{name}: {detail}" if detail else name


def encode_output(value: object) -> str:
    """A tool's result as output text: strings verbatim, everything else JSON-encoded once.

    Pydantic models, dataclasses, enums, dates and the like are encoded the way pydantic
    serialises them; anything it cannot encode raises :class:`ToolError`.
    """
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value).decode("utf-8")
    except pydantic_core.PydanticSerializationError as exc:
        raise ToolError(f"result of type {type(value).__name__} is not JSON-serialisable ({exc})") from None


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _describe_one(error: Any) -> str:
    where = _field(tuple(error.get("loc", ())))
    kind = error.get("type", "")
    if kind == "missing":
        return f"field {where!r} is required"
    if kind == "extra_forbidden":
        return f"unexpected field {where!r}"
    message = str(error.get("msg", "is not valid"))
    return f"field {where!r}: {message[0].lower() + message[1:] if message else message}" if where else message


def describe_invalid(exc: ValidationError, limit: int = 3) -> str:
    """A one-line account of what is wrong with a call's arguments."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [_describe_one(e) for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)
