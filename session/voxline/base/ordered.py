"""Collections kept in the order things came: an id looked up among the newest first, and the
newest entries of a table kept.

A conversation's items are placed after the one before them and deleted by a cut: both touch
the newest items, so they are looked for among the last few first, and in the whole list only
when not there, which keeps both the common case and the worst one at C speed. A table of what a
session of days has seen keeps its newest entries only (a ``dict`` keeps insertion order).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

__all__ = ["TAIL", "keep_newest", "last_index"]

TAIL = 64
"""The newest ids looked through first."""


def last_index(ids: list[str], item_id: str) -> int | None:
    """Where ``item_id`` is in ``ids`` (ids are unique), or None: among the last :data:`TAIL` first."""
    start = max(0, len(ids) - TAIL)
    try:
        return ids.index(item_id, start)
    except ValueError:
        pass
    try:
        return ids.index(item_id, 0, start)
    except ValueError:
        return None


def keep_newest(table: MutableMapping[Any, Any], count: int) -> None:
    """Drop the oldest entries of ``table`` (insertion order) past ``count``."""
    while len(table) > count:
        del table[next(iter(table))]
