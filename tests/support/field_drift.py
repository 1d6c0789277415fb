"""Every field of the newest ``openai`` package's realtime types, as one small request each.

:func:`cases` walks a pydantic model of the SDK (a session, an item, a response request) and
yields, for every field at any depth and in every member of a union, a :class:`Case`: the
smallest object that sets that field (required siblings filled in), the value it set, and a
wrongly typed value for it. The drift test sends each to the local server and checks that it is
accepted and echoed, and that the wrong one is refused naming the field. A field the next SDK
release adds becomes a new case by itself.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["Case", "alternatives", "cases", "echoed"]

# Values the server must take as valid where any string of the type's would not do.
_STRINGS = {
    "audio": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  # 48 bytes of silence, base64
    "voice": "marin", "model": "gpt-realtime-2.1", "language": "en", "languages": "en", "role": "user",
    "call_id": "call_drift", "id": "item_drift", "server_label": "drift", "server_url": "https://mcp.invalid/",
    "arguments": "{}", "output": "{}", "name": "get_weather", "previous_item_id": "item_drift",
}
_PATHS: dict[str, Any] = {  # where a field's own name is not enough
    "transcription.model": "gpt-transcribe", "session.model": "gpt-realtime-2.1", "voice": "cedar",
}
_PART_TYPES = {"audio": ("input_audio", "output_audio"), "transcript": ("input_audio", "output_audio"),
               "image_url": ("input_image",), "detail": ("input_image",)}
_SERVICE_REQUIRED = {("RealtimeFunctionTool", "name")}  # optional in the SDK, required by the service
_NUMBERS: dict[str, float] = {
    "idle_timeout_ms": 6000, "prefix_padding_ms": 240, "silence_duration_ms": 640, "threshold": 0.7,
    "speed": 1.2, "strength": 0.4, "retention_ratio": 0.6, "rate": 24000, "max_output_tokens": 321,
    "post_instructions": 1000,
}


@dataclass(frozen=True)
class Case:
    """One field: ``path`` (dotted, ``[kind]`` for a union member), a request that sets it, the value."""

    path: str
    request: dict[str, Any]
    value: Any
    wrong: Any  # None: the field takes any JSON value


def _strip(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def alternatives(tp: Any) -> list[Any]:
    """The non-null alternatives of a (possibly optional, possibly nested) union, or ``[tp]``."""
    tp = _strip(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) if a is not type(None) for m in alternatives(a)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _kind(model: type[BaseModel]) -> str:
    field = model.model_fields.get("type") or model.model_fields.get("role")
    if field is not None:
        options = [o for m in alternatives(field.annotation) if typing.get_origin(m) is Literal for o in typing.get_args(m)]
        if len(options) == 1:
            return str(options[0])
    return model.__name__


def _scalar(tp: Any, name: str, path: str = "") -> Any:
    """A valid value of a leaf type (``...`` when there is none to make)."""
    members = alternatives(tp)
    literals = [o for m in members if typing.get_origin(m) is Literal for o in typing.get_args(m)]
    for key, value in _PATHS.items():
        if path.endswith(key):
            return value
    if literals:
        return literals[-1] if name != "type" else literals[0]
    first = members[0]
    if first is str:
        return _STRINGS.get(name, f"drift {name}")
    if first is bool:
        return True
    if first is int:
        return int(_NUMBERS.get(name, 7))
    if first is float:
        return float(_NUMBERS.get(name, 0.5))
    if first is object or typing.get_origin(first) is dict or first is dict:
        return {"drift": "yes"}
    if typing.get_origin(first) in (list, typing.List):
        inner = _scalar(typing.get_args(first)[0], name, path)
        return ... if inner is ... else [inner]
    if _is_model(first):
        return minimal(first)
    return ...


def _accepts(tp: Any, value: Any) -> bool:
    """Whether a leaf of type ``tp`` would take ``value`` (by JSON type, literals by value)."""
    for member in alternatives(tp):
        origin = typing.get_origin(member)
        if origin is Literal:
            if value in typing.get_args(member) and type(value) is not bool:
                return True
        elif member is bool:
            if isinstance(value, bool):
                return True
        elif member in (int, float):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif member is str:
            if isinstance(value, str):
                return True
        elif origin in (list, typing.List):
            if isinstance(value, list):
                return True
        elif isinstance(value, dict) or member is object:
            return True
    return False


def _wrong(tp: Any) -> Any:
    """A value of a JSON type the field does not take."""
    return next((v for v in ("not this", 7, True, ["x"], {"x": 1}) if not _accepts(tp, v)), None)


def minimal(model: type[BaseModel]) -> dict[str, Any]:
    """``model`` with only its required fields (and ``type``), each a valid value."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.is_required() or name == "type" or (model.__name__, name) in _SERVICE_REQUIRED:
            value = _scalar(field.annotation, name)
            if value is not ...:
                out[name] = value
    return out


def cases(model: type[BaseModel], prefix: str = "", _seen: tuple[type, ...] = ()) -> Iterator[Case]:
    """One :class:`Case` per field of ``model`` at any depth (a union of objects: each member)."""
    base = minimal(model)
    for name, field in model.model_fields.items():
        members = alternatives(field.annotation)
        if name == "type" and len(members) == 1:
            continue  # the discriminator: set in every case already
        listed = [m for m in members if typing.get_origin(m) in (list, typing.List)]
        objects = [(m, "") for m in members if _is_model(m)]
        objects += [(sub, "[]") for m in listed for sub in alternatives(typing.get_args(m)[0]) if _is_model(sub)]
        scalars = [m for m in members if not _is_model(m)]
        scalars = [m for m in scalars if not (m in listed and all(_is_model(x) for x in alternatives(typing.get_args(m)[0])))]
        if scalars and not (name in base and field.is_required()):
            value = _scalar(typing.Union[tuple(scalars)] if len(scalars) > 1 else scalars[0], name, prefix + name)
            if value is not ...:
                request = {**base, name: value}
                if name in _PART_TYPES and "type" in base:  # a content part of the kind that has this field
                    options = [o for m in alternatives(model.model_fields["type"].annotation) for o in typing.get_args(m)]
                    request["type"] = next((t for t in _PART_TYPES[name] if t in options), base["type"])
                yield Case(prefix + name, request, value, _wrong(field.annotation))
        several = len(objects) > 1 or bool(scalars and objects)
        for sub, suffix in objects:
            if sub in _seen:
                continue
            label = f"{prefix}{name}{suffix}" + (f"[{_kind(sub)}]" if several else "")
            found = False
            for case in cases(sub, "", _seen + (model,)):
                found = True
                nested = [case.request] if suffix else case.request
                yield Case(f"{label}.{case.path}", {**base, name: nested}, case.value, case.wrong)
            if not found:  # nothing but its discriminator or required fields: the member itself is the case
                whole = minimal(sub)
                yield Case(label, {**base, name: [whole] if suffix else whole}, whole, "not an object")


def echoed(sent: Any, got: Any) -> bool:
    """Whether ``got`` carries everything in ``sent`` (objects: a superset; lists: item by item)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(k in got and echoed(v, got[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(got) == len(sent) and all(echoed(s, g) for s, g in zip(sent, got))
    if isinstance(sent, float) and isinstance(got, (int, float)):
        return abs(sent - got) < 1e-9
    return bool(sent == got)
