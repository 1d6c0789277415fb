"""Looking up an id in a list kept in order, from the end, where a conversation grows.

A conversation's items are placed after the one before them and deleted by a cut: both touch
the newest items, so a look from the end costs the same in a conversation of days as in one of
minutes, where ``list.index`` and ``list.remove`` look through every item from the first.
"""

from __future__ import annotations

__all__ = ["last_index"]


def last_index(ids: list[str], item_id: str) -> int | None:
    """Where ``item_id`` last is in ``ids``, or None; in steps as many as the items after it."""
    for at in range(len(ids) - 1, -1, -1):
        if ids[at] == item_id:
            return at
    return None
