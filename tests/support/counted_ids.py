"""Item ids whose comparisons are counted: the work a conversation does to place, find and delete items."""

from __future__ import annotations

__all__ = ["CountedId"]


class CountedId(str):
    """A ``str`` id; every ``==`` it takes part in as the left side adds one to :attr:`compared`."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedId.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__
