"""The conversation mirror saved as plain JSON, and read back.

Version 1: ``{"version": 1, "bytes_per_ms": float, "items": [item, ...] (server order),
"deleted": [item, ...], "pending_deletes": [id, ...], "response_of": {item_id: response_id}}``;
each item holds the fields of :class:`~voxline.session.mirror.records.MirrorItem`, plus,
for readers, ``heard_text`` and ``heard_text_method`` (:attr:`MirrorItem.heard`), which are
derived and dropped when the state is read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from voxline.base.files import replaced, utf8
from voxline.realtime.errors import ConfigurationError

from .records import MirrorItem

__all__ = ["MirrorState", "read_state", "write_state"]


class MirrorState(BaseModel):
    """What a mirror saves; validated when read back."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1]
    bytes_per_ms: float
    items: list[MirrorItem]
    deleted: list[MirrorItem]
    pending_deletes: list[str]
    response_of: dict[str, str]

    @model_validator(mode="after")
    def _unique_ids(self) -> MirrorState:
        ids = [item.id for item in self.items]
        if len(set(ids)) != len(ids):
            raise ValueError("an item id appears twice in 'items'")
        return self

    @classmethod
    def parse(cls, data: object) -> MirrorState:
        """Validate a saved state; :class:`ConfigurationError` names the first problem."""
        if isinstance(data, dict) and isinstance(data.get("items"), list):
            data = {**data, "items": [_without_derived(item) for item in data["items"]]}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "top level"
            raise ConfigurationError(f"invalid conversation mirror state at {where}: {first['msg']}") from None


_DERIVED = ("heard_text", "heard_text_method")


def _without_derived(item: object) -> object:
    if isinstance(item, dict):
        return {key: value for key, value in item.items() if key not in _DERIVED}
    return item


def write_state(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as UTF-8 JSON to ``path``, whole (:func:`~voxline.base.files.replaced`)."""
    with replaced(path) as file:
        file.write(utf8(json.dumps(data, ensure_ascii=False, indent=1)))


def read_state(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`ConfigurationError` if unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read conversation mirror state from {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"conversation mirror state in {path} is not a JSON object")
    return data
