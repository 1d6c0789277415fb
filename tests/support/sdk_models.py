"""One walk over the official ``openai`` package's event models, for the Realtime and the Live oracles.

- :func:`discriminated`: a ``TypeAdapter`` over an SDK event union with a real discriminator on ``type``.
- :func:`type_names`: the ``type`` values of a union's members.
- :func:`undeclared_keys`: the paths of keys a validated model carries that its models do not declare.
- :func:`validated`: one event (JSON text or dict) checked against an adapter, with no undeclared key
  beyond those ``allowed``; ``AssertionError`` naming the event otherwise.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Collection
from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

__all__ = ["discriminated", "type_names", "undeclared_keys", "validated"]


def _union_models(alias: Any) -> tuple[type[BaseModel], ...]:
    return typing.get_args(typing.get_args(alias)[0])


def discriminated(alias: Any) -> TypeAdapter[Any]:
    """An adapter over the members of the SDK union ``alias``, discriminated on ``type``."""
    return TypeAdapter(Annotated[Union[_union_models(alias)], Field(discriminator="type")])  # type: ignore[misc]


def type_names(alias: Any) -> frozenset[str]:
    """The ``type`` of every member of the SDK union ``alias``."""
    return frozenset(typing.get_args(m.model_fields["type"].annotation)[0] for m in _union_models(alias))


def undeclared_keys(value: Any, path: str = "") -> list[str]:
    """Paths of keys that the official models did not declare."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            found.append(f"{path}.{key}" if path else key)
        for name in type(value).model_fields:
            found.extend(undeclared_keys(getattr(value, name), f"{path}.{name}" if path else name))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found.extend(undeclared_keys(v, f"{path}[{i}]"))
    return found


def validated(adapter: TypeAdapter[Any], event: str | bytes | dict[str, Any], what: str,
              allowed: Collection[str] = ()) -> tuple[dict[str, Any], BaseModel]:
    """The event as a dict and as the SDK's model; ``AssertionError`` if invalid or carrying undeclared keys."""
    raw = json.loads(event) if isinstance(event, (str, bytes)) else event
    if not isinstance(raw, dict):
        raise AssertionError(f"{what} event is not a JSON object: {raw!r}"[:300])
    try:
        model = adapter.validate_python(raw)
    except ValidationError as exc:
        raise AssertionError(f"{what} event {raw.get('type')!r} is not valid per openai: {exc}\n{raw}") from None
    extra = [key for key in undeclared_keys(model) if key not in allowed]
    if extra:
        raise AssertionError(f"{what} event {raw.get('type')!r} has keys openai does not know: {extra}\n{raw}")
    return raw, model
