"""The text of a ``function_call_output`` item: results encoded once, errors as one-line JSON.

The output of a call is always a string (docs/protocol.md §9). A string result is sent as is;
anything else is JSON-encoded exactly once, so a result is never a JSON string inside a
JSON string. Failures go back to the model as ``{"error":"<one line>"}`` with secrets
redacted and no traceback.

An output travels in one ``conversation.item.create``, and one client event is at most
:data:`MAX_EVENT_BYTES` of JSON text (docs/protocol.md §11): the service refuses a bigger
one, and the call would be left without an output. :func:`unsendable` says when an output
cannot be sent (too large, or text that is not Unicode), so that the call is answered with
an error instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pydantic_core
from pydantic import ValidationError

from voxline.base.errors import message_of
from voxline.base.shown import clip
from voxline.realtime.errors import ToolError
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES

__all__ = [
    "MAX_EVENT_BYTES",
    "describe_exception",
    "describe_invalid",
    "encode_output",
    "error_output",
    "one_line",
    "unsendable",
]

_MAX_MESSAGE = 500

MAX_EVENT_BYTES = MAX_CLIENT_EVENT_BYTES
"""The largest client event, in bytes of JSON text, that the service takes (the wire's own limit)."""

_ENVELOPE_SPARE = 256  # what is added to an output event on its way out: its event_id and item id


def one_line(text: str, limit: int = _MAX_MESSAGE) -> str:
    """Collapse whitespace (newlines included), redact secrets and cap the length (:func:`clip`)."""
    return clip(text, limit, flat=True)


def error_output(message: str) -> str:
    """The output text for a call that failed: ``{"error":"<message>"}``."""
    return json.dumps({"error": one_line(message)}, separators=(",", ":"), ensure_ascii=False)


def describe_exception(exc: BaseException) -> str:
    """``"Type: message"``, or the type's name alone when the message is empty or ``str()`` fails."""
    name = type(exc).__name__
    detail = message_of(exc, "")  # the exception's own __str__ is user code too, whatever it raises
    return f"{name}: {detail}" if detail else name


def unsendable(call_id: str, name: str, output: str, limit: int = MAX_EVENT_BYTES) -> str | None:
    """Why ``output`` cannot be sent as the output of call ``call_id``, or ``None`` if it can.

    Its size is that of the ``conversation.item.create`` carrying it, in bytes of the JSON text
    sent (quotes and escapes included), with room for the fields added on the way out.
    """
    if len(output) + _ENVELOPE_SPARE > limit:  # each character is a byte of the frame at least: no need to encode it
        return _too_large(name, f"{len(output)} bytes" if output.isascii() else f"{len(output)} characters", limit)
    item = {"type": "function_call_output", "call_id": call_id, "output": output}
    try:
        frame = pydantic_core.to_json({"type": "conversation.item.create", "item": item})
    except pydantic_core.PydanticSerializationError:
        return f"the output of {name} is not valid Unicode text (it holds an unpaired surrogate)"
    if len(frame) + _ENVELOPE_SPARE <= limit:
        return None
    return _too_large(name, f"{len(output.encode('utf-8'))} bytes", limit)  # fewer characters than the limit


def _too_large(name: str, size: str, limit: int) -> str:
    return f"the output of {name} is too large to send: {size}, and one event carries at most {limit} bytes"


def encode_output(value: object) -> str:
    """A tool's result as output text: strings verbatim, everything else JSON-encoded once.

    Pydantic models, dataclasses, enums, dates and the like are encoded the way pydantic
    serialises them, a NaN or an infinity as ``null`` (as JSON.stringify does); anything it
    cannot encode raises :class:`ToolError`.
    """
    kind = type(value)  # not value.__class__, isinstance() or hasattr(): each asks the object, which may lie or raise
    if issubclass(kind, str):
        return str.__str__(value)  # a plain copy: a subclass's hooks are user code
    if issubclass(kind, (Iterator, AsyncIterator)):  # a generator, map(), an open file: never run here, on the loop
        raise ToolError(f"result of type {kind.__name__} is an iterator, whose items would be made on the "
                        "event loop, past the tool's timeout: return them whole (a list, say)")
    try:
        return pydantic_core.to_json(value, inf_nan_mode="null").decode("utf-8")  # JSON has no NaN
    except pydantic_core.PydanticSerializationError as exc:
        raise ToolError(f"result of type {kind.__name__} is not JSON-serialisable ({message_of(exc, '')})") from None
    except Exception as exc:  # the result's own methods (a __str__, a property pydantic reads) are user code
        raise ToolError(f"result of type {kind.__name__} could not be encoded: {describe_exception(exc)}") from None


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _describe_one(error: Any) -> str:
    where = _field(tuple(error.get("loc", ())))
    kind = error.get("type", "")
    if kind == "missing":
        return f"field {where!r} is required"
    if kind == "extra_forbidden":
        return f"unexpected field {where!r}"
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")  # a validator's own words
    return f"field {where!r}: {message[0].lower() + message[1:] if message else message}" if where else message


def describe_invalid(exc: ValidationError, limit: int = 3) -> str:
    """A one-line account of what is wrong with a call's arguments."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [_describe_one(e) for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)
