"""Decode and encode wire events: JSON text in, typed events out, and back.

Decoding happens once, at the edge. A known type goes straight through pydantic-core's
JSON parser and a tagged union (the fast path, also for audio deltas); only when that
fails do we look closer, to tell an unknown or beta type (returned, never raised) from a
malformed event (:class:`RemoteProtocolError` with one short line, never the payload).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from voxline.base.shown import clip
from voxline.base.json_text import escapes_surrogate, whole_characters

from ..errors import LocalProtocolError, RemoteProtocolError
from .client import BETA_CLIENT_EVENT_TYPES, CLIENT_EVENT_CLASSES, CLIENT_EVENT_TYPES, ClientEvent
from .fallback import BETA_SERVER_EVENT_TYPES, BetaServerEvent, UnknownServerEvent
from .registry import SERVER_EVENT_TYPES, KnownServerEvent, ServerEvent

__all__ = [
    "MAX_CLIENT_EVENT_BYTES",
    "client_event_dict",
    "json_text_bytes",
    "describe_validation_error",
    "encode_client_event",
    "encode_server_event",
    "parse_client_dict",
    "parse_client_event",
    "parse_server_event",
]

MAX_CLIENT_EVENT_BYTES = 20 * 1024 * 1024 + 64 * 1024
"""The largest client event, in bytes of JSON text, taken (docs/protocol.md §11): the service takes 15 MiB of audio
in one append, which base64 makes exactly 20 MiB, and the event around it needs room too."""


def json_text_bytes(text: str) -> int:
    """How many bytes ``text`` takes as a JSON string in a frame: its quotes and escapes counted, UTF-8."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8"))


_SERVER: TypeAdapter[Any] = TypeAdapter(KnownServerEvent)
_CLIENT: TypeAdapter[Any] = TypeAdapter(ClientEvent)

_EXPECTED = {
    "int_type": "expected int",
    "int_parsing": "expected int",
    "int_from_float": "expected int",
    "string_type": "expected str",
    "float_type": "expected number",
    "float_parsing": "expected number",
    "bool_type": "expected bool",
    "bool_parsing": "expected bool",
    "list_type": "expected list",
    "dict_type": "expected object",
    "model_type": "expected object",
    "model_attributes_type": "expected object",
    "missing": "is missing",
}


def _short(value: object, limit: int = 60) -> str:
    """``repr`` of an untrusted value, cut to one short line."""
    return clip(repr(value), limit)  # redacted before it is cut: a cut secret is no longer recognisable


def _path(loc: tuple[int | str, ...], data: object) -> str:
    """Dotted path of an error location, walked through the input so union tags drop out."""
    out = ""
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        elif not (last and isinstance(data, dict)):
            continue  # a union member's tag, not a key of the input
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_validation_error(side: str, kind: str, exc: ValidationError, data: object) -> str:
    """One line naming the first bad field of a ``side`` event of type ``kind`` (no input values).

    ``data`` is the decoded input, used to name fields exactly. Wrong types are reported
    before missing fields: they are the more specific complaint.
    """
    errors = exc.errors(include_url=False, include_input=False)
    first = min(errors, key=lambda error: error["type"] == "missing")
    loc = tuple(first["loc"])
    if loc and loc[0] == kind:
        loc = loc[1:]
    problem = _EXPECTED.get(first["type"]) or first["msg"].splitlines()[0].replace("Input should be", "expected", 1)
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    path = _path(loc, data)
    where = f"field {path!r} " if path else ""
    return f"malformed {side} event {_short(kind)}: {where}{problem}{more}"


def _load_object(text: str | bytes, side: str) -> dict[str, Any]:
    """Decode JSON that must be an object with a string ``type``; anything else is malformed."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise RemoteProtocolError(f"malformed {side} event: not valid JSON{where}") from None
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"malformed {side} event: expected a JSON object, got {type(obj).__name__}")
    if not isinstance(obj.get("type"), str):
        problem = "has no 'type'" if "type" not in obj else "has a 'type' that is not a string"
        raise RemoteProtocolError(f"malformed {side} event: {problem}")
    return obj


def parse_server_event(text: str | bytes) -> ServerEvent:
    """Decode one server frame.

    Known GA types become their model; unknown types an :class:`UnknownServerEvent`; beta
    names a :class:`BetaServerEvent`. Malformed JSON, a non-object, a missing or
    non-string ``type``, or bad fields of a known type raise :class:`RemoteProtocolError`.
    """
    try:
        event: ServerEvent = _SERVER.validate_json(text)
        return event
    except ValidationError as exc:
        failure = exc
    except (ValueError, TypeError, RecursionError) as exc:  # a validator that met a shape it never expected
        raise RemoteProtocolError(f"malformed server event: {type(exc).__name__} while validating") from None
    obj = _load_object(text, "server")
    if escapes_surrogate(text):  # half a character (which pydantic's JSON refuses) becomes U+FFFD, not a lost frame
        try:
            obj = whole_characters(obj)
            event = _SERVER.validate_python(obj)
            return event
        except ValidationError as exc:
            failure = exc
        except RecursionError:  # as deep as json.loads goes, deeper than the walk may
            raise RemoteProtocolError("malformed server event: nested too deeply to read") from None
        except (ValueError, TypeError) as exc:
            raise RemoteProtocolError(f"malformed server event: {type(exc).__name__} while validating") from None
    kind: str = obj["type"]
    if kind in SERVER_EVENT_TYPES:
        raise RemoteProtocolError(describe_validation_error("server", kind, failure, obj))
    if kind in BETA_SERVER_EVENT_TYPES:
        return BetaServerEvent(type=kind, ga_type=BETA_SERVER_EVENT_TYPES[kind], raw=obj)
    return UnknownServerEvent(type=kind, raw=obj)


def parse_client_event(text: str | bytes) -> ClientEvent:
    """Decode one client frame (for servers and tests); any failure is a :class:`RemoteProtocolError`."""
    try:
        event: ClientEvent = _CLIENT.validate_json(text)
        return event
    except ValidationError as exc:
        failure = exc
    obj = _load_object(text, "client")
    kind: str = obj["type"]
    if kind in BETA_CLIENT_EVENT_TYPES:
        raise RemoteProtocolError(f"client event {kind!r} belongs to the retired beta protocol")
    if kind not in CLIENT_EVENT_TYPES:
        raise RemoteProtocolError(f"unknown client event type {_short(kind)}")
    raise RemoteProtocolError(describe_validation_error("client", kind, failure, obj))


def parse_client_dict(payload: Mapping[str, Any]) -> ClientEvent:
    """Build a client event from a dict we are about to send; :class:`LocalProtocolError` if invalid."""
    kind = payload.get("type")
    if kind not in CLIENT_EVENT_TYPES:
        raise LocalProtocolError(f"not a GA client event type: {_short(kind)}")
    try:
        event: ClientEvent = _CLIENT.validate_python(payload)
    except ValidationError as exc:
        raise LocalProtocolError(describe_validation_error("client", str(kind), exc, payload)) from None
    return event


def client_event_dict(event: ClientEvent) -> dict[str, Any]:
    """The JSON-ready dict :func:`encode_client_event` would send."""
    if not isinstance(event, CLIENT_EVENT_CLASSES):
        raise LocalProtocolError(f"not a client event: {type(event).__name__}")
    data: dict[str, Any] = event.model_dump(mode="json")
    return data


def encode_client_event(event: ClientEvent) -> str:
    """Compact JSON for one client event: ``type`` always, unset ``None`` fields never."""
    if not isinstance(event, CLIENT_EVENT_CLASSES):
        raise LocalProtocolError(f"not a client event: {type(event).__name__}")
    return event.model_dump_json()


def encode_server_event(event: ServerEvent) -> str:
    """Compact JSON for one server event (the local server's side); raw events are sent as kept."""
    if isinstance(event, (UnknownServerEvent, BetaServerEvent)):
        return json.dumps(event.raw, separators=(",", ":"), ensure_ascii=False)
    return event.model_dump_json()
