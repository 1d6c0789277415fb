"""Items in server order, placed by ``previous_item_id`` (docs/protocol.md §4–5).

In server events (``conversation.item.added``/``.done``, ``input_audio_buffer.committed``)
``previous_item_id`` names the item just before the new one, and ``null`` means it has
none: the item is first. ``"root"`` (the client's spelling of "first") is accepted too.
An id the mirror does not know puts the item last, the best guess left.
"""

from __future__ import annotations

from collections.abc import Iterator

from voxline.base.ordered import last_index

from .records import MirrorItem

__all__ = ["MAX_ITEMS", "ItemOrder", "insertion_index"]

MAX_ITEMS = 4096
"""Live items a conversation keeps, the newest: a reconnect's rebuild carries ``SessionSettings.rebuild_items`` (at
most this many, reaching back to the calls still owed an output) and forgets the rest; this bounds a connection
that lives for days."""


def insertion_index(ids: list[str], previous_item_id: str | None) -> int:
    """Where an item placed after ``previous_item_id`` goes in ``ids``.

    Looked for among the newest first, where a conversation grows: placing after the last item costs
    the same in a conversation of days as in one of minutes."""
    if previous_item_id is None or previous_item_id == "root":
        return 0
    at = last_index(ids, previous_item_id)
    return len(ids) if at is None else at + 1


class ItemOrder:
    """Live items by id, with their order; an item keeps its place once it has one; the newest :data:`MAX_ITEMS`."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._items: dict[str, MirrorItem] = {}

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[MirrorItem]:
        return (self._items[item_id] for item_id in self._ids)

    def get(self, item_id: str) -> MirrorItem | None:
        return self._items.get(item_id)

    def last_id(self) -> str | None:
        return self._ids[-1] if self._ids else None

    def place(self, item: MirrorItem, previous_item_id: str | None) -> str | None:
        """Add a new item after ``previous_item_id``; an item already present is replaced in place. The id of the
        oldest item let go to stay within :data:`MAX_ITEMS`, if one was."""
        evicted = None
        if item.id not in self._items:
            known = previous_item_id in self._items  # an unknown one goes last, without a look at every id
            at = insertion_index(self._ids, previous_item_id) if known or previous_item_id in (None, "root") else None
            self._ids.insert(len(self._ids) if at is None else at, item.id)
            if len(self._ids) > MAX_ITEMS:  # the oldest other than this one goes
                evicted = self._ids.pop(1 if self._ids[0] == item.id else 0)
                del self._items[evicted]
        self._items[item.id] = item
        return evicted

    def append(self, item: MirrorItem) -> str | None:
        """Add ``item`` last (restoring a saved order); as :meth:`place`."""
        return self.place(item, self._ids[-1] if self._ids else None)

    def replace(self, item: MirrorItem) -> None:
        """Store a new version of an item that is present."""
        if item.id not in self._items:
            raise KeyError(item.id)
        self._items[item.id] = item

    def drop_oldest(self, count: int) -> list[str]:
        """Forget the first ``count`` items (a conversation's oldest, which a rebuild no longer carries): their ids."""
        dropped = self._ids[:count]
        for item_id in dropped:
            del self._items[item_id]
        del self._ids[:count]
        return dropped

    def remove(self, item_id: str) -> MirrorItem | None:
        """Take an item out; ``None`` if it is not present."""
        item = self._items.pop(item_id, None)
        if item is not None:
            at = last_index(self._ids, item_id)  # a cut or a rebuild deletes recent items
            if at is not None:  # always: an item is in both
                del self._ids[at]
        return item
