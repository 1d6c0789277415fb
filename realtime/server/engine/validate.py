"""A small strict validator for client events, with the service's error wording.

A schema is a mapping of field name → :class:`Field`. Objects are strict: a key the
schema does not list is an ``unknown_parameter``. An object field without ``fields`` is open (any keys).
Objects may be discriminated
unions (``variants``): the discriminator picks the schema of the rest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import RequestRejected

__all__ = ["MAX_DEPTH", "Field", "PlainStrings", "Schema", "a_kind", "check_object", "check_value", "json_kind",
           "parse_json", "plain_strings"]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a client event or request body.

Real events nest a dozen levels at most (a tool's JSON schema inside ``session.tools``
a few more); the limit keeps every later walk over the value (validation, copies,
echoes) far from Python's recursion limit.
"""

_MAX_INTEGER = 2**53  # the largest integer every JSON client holds exactly

_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def parse_json(text: str | bytes) -> Any:
    """Decode one JSON value; :class:`RequestRejected` (``invalid_json``) if malformed or too deep.

    The work is bounded by the text's size: the decoder itself stops at Python's recursion
    limit, and the depth check visits each container once, without recursion.
    """
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            data = _DECODER.decode(text)  # what json.loads does for text, without a new decoder per frame
        else:
            data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise RequestRejected(errors.invalid_json(_too_deep())) from None
    except ValueError as exc:  # UnicodeDecodeError included
        message = str(exc)
        if "integer string conversion" in message:  # Python's own limit, in Python's words: said as JSON's
            message = "a number has more digits than a JSON number may (4300)"
        raise RequestRejected(errors.invalid_json(message)) from None
    if _depth_exceeds(data, MAX_DEPTH):
        raise RequestRejected(errors.invalid_json(_too_deep()))
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def _too_deep() -> str:
    return f"Objects and arrays are nested deeper than the maximum of {MAX_DEPTH} levels."


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Is any object or array in ``value`` nested more than ``limit`` levels deep?"""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        for child in current.values() if isinstance(current, dict) else current:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


@dataclass(frozen=True, slots=True)
class Field:
    """Allowed JSON kinds of one field, and the rules for its value."""

    kinds: tuple[str, ...]
    required: bool = False
    choices: tuple[str, ...] | None = None
    fields: Mapping[str, Field] | None = None
    variants: tuple[str, Mapping[str, Mapping[str, Field]]] | None = None
    items: Field | None = None
    minimum: float | None = None
    maximum: float | None = None
    values: Field | None = None  # an open object whose every value must match this


Schema = Mapping[str, Field]


@dataclass(frozen=True, slots=True)
class PlainStrings:
    """A schema whose every field takes any string and nothing else (an audio append's).

    A value of such fields only, each a string, the required ones present, passes
    :func:`check_object` as it is and has no ``null`` to drop: :meth:`holds` tells so in a few
    set operations, where the full check walks every field.
    """

    allowed: frozenset[str]
    required: frozenset[str]

    def holds(self, value: Mapping[str, Any]) -> bool:
        keys = value.keys()
        if not (keys <= self.allowed and self.required <= keys):
            return False
        for element in value.values():  # (a loop: a generator in all() costs as much as the rest)
            if type(element) is not str:
                return False
        return True


def plain_strings(schema: Schema) -> PlainStrings | None:
    """The :class:`PlainStrings` of ``schema`` if every field of it is a string without choices, else None."""
    if all(field.kinds == ("string",) and field.choices is None for field in schema.values()):
        return PlainStrings(frozenset(schema), frozenset(key for key, field in schema.items() if field.required))
    return None


def a_kind(value: Any) -> str:
    """What a decoded value is, as an error message says it (``"a string"``, ``"an object"``, ``"null"``)."""
    return _ARTICLE.get(json_kind(value), "a value")


def json_kind(value: Any) -> str:
    """The JSON kind of a decoded value (``"integer"`` for whole floats too)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "unknown"


def _expected(kinds: tuple[str, ...]) -> str:
    words = [_ARTICLE[k] for k in kinds]
    return words[0] if len(words) == 1 else "one of " + ", ".join(words[:-1]) + " or " + words[-1]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_object(value: Mapping[str, Any], schema: Schema, path: str = "") -> None:
    """Raise :class:`RequestRejected` for the first problem in ``value``."""
    for key in value:
        if key not in schema:
            raise RequestRejected(errors.unknown_parameter(_join(path, key)))
    for key, field in schema.items():
        if key not in value:
            if field.required:
                raise RequestRejected(errors.missing_parameter(_join(path, key)))
            continue
        check_value(value[key], field, _join(path, key))


def check_value(value: Any, field: Field, path: str) -> None:
    """Check one value against its field rules."""
    kind = json_kind(value)
    accepted = kind in field.kinds or (kind == "integer" and "number" in field.kinds)
    if not accepted:
        if kind == "string" and field.choices and "string" not in field.kinds:
            raise RequestRejected(errors.invalid_choice(path, value, field.choices))
        raise RequestRejected(errors.invalid_type(path, _expected(field.kinds), _ARTICLE.get(kind, "a value")))
    if kind == "string" and field.choices is not None and value not in field.choices:
        raise RequestRejected(errors.invalid_choice(path, value, field.choices))
    if kind in ("integer", "number"):
        if kind == "integer" and "number" not in field.kinds and abs(value) > _MAX_INTEGER:
            # 1e308 is a whole number to JSON, but no client can hold it as an integer
            limit = _MAX_INTEGER if value > 0 else -_MAX_INTEGER
            spec = errors.above_max(path, limit, value) if value > 0 else errors.below_min(path, limit, value)
            raise RequestRejected(spec)
        _check_range(value, field, path)
    elif kind == "array" and field.items is not None:
        for index, element in enumerate(value):
            check_value(element, field.items, f"{path}[{index}]")
    elif kind == "object":
        _check_nested(value, field, path)


def _check_range(number: float, field: Field, path: str) -> None:
    # no float() here: a 400-digit integer does not fit one; ints and floats compare exactly
    shown = number if isinstance(number, int) or not number.is_integer() else int(number)
    if field.minimum is not None and number < field.minimum:
        raise RequestRejected(errors.below_min(path, _num(field.minimum), shown))
    if field.maximum is not None and number > field.maximum:
        raise RequestRejected(errors.above_max(path, _num(field.maximum), shown))


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _check_nested(value: Mapping[str, Any], field: Field, path: str) -> None:
    if field.variants is not None:
        key, schemas = field.variants
        if key not in value:
            raise RequestRejected(errors.missing_parameter(_join(path, key)))
        tag = value[key]
        if not isinstance(tag, str) or tag not in schemas:
            raise RequestRejected(errors.invalid_choice(_join(path, key), tag, tuple(schemas)))
        check_object(value, schemas[tag], path)
    elif field.fields is not None:
        check_object(value, field.fields, path)
    elif field.values is not None:
        for key, element in value.items():
            check_value(element, field.values, _join(path, key))
