"""Looking up an id in a list kept in order, the newest first, where a conversation grows.

A conversation's items are placed after the one before them and deleted by a cut: both touch
the newest items, so they are looked for among the last few first, and in the whole list only
when not there, which keeps both the common case and the worst one at C speed.
"""

from __future__ import annotations

__all__ = ["TAIL", "last_index"]

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
