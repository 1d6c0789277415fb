"""Explicit ``null`` in an optional field means "not given", as the service takes it.

Real clients serialise unset optional fields as ``null`` (LiveKit Agents sends
``"response": {"instructions": null, …}`` on every reply). The service treats such
a field as absent; only where a schema lists ``"null"`` as an accepted kind does the
value keep a meaning of its own (``turn_detection``, ``noise_reduction`` and
``transcription``: off). :func:`without_nulls` rewrites a decoded event before it is
validated, so the validator and everything after it only see given fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voxline.realtime.server.engine.validate import Field, Schema

__all__ = ["value_without_nulls", "without_nulls"]


def without_nulls(value: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """A copy of ``value`` without the ``null`` fields ``schema`` does not accept as ``null``."""
    out: dict[str, Any] = {}
    for key, element in value.items():
        field = schema.get(key)
        if field is None:  # unknown keys stay, so the validator names them
            out[key] = element
        elif element is None:
            if "null" in field.kinds:
                out[key] = None
        else:
            out[key] = value_without_nulls(element, field)
    return out


def value_without_nulls(value: Any, field: Field) -> Any:
    """``value`` (checked against ``field``) without the ``null`` fields its schema does not accept."""
    if isinstance(value, dict):
        if field.variants is not None:
            key, schemas = field.variants
            tag = value.get(key)
            if isinstance(tag, str) and tag in schemas:
                return without_nulls(value, schemas[tag])
            return value
        if field.fields is not None:
            return without_nulls(value, field.fields)
        return value
    if isinstance(value, list) and field.items is not None:
        return [value_without_nulls(element, field.items) for element in value]
    return value
