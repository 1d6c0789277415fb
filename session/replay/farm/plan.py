"""Splitting a farm: shards for machines (``--shard I/N``), parts for worker processes.

Shards are **0-based**: ``--shard 0/4`` … ``--shard 3/4``, the numbering of a Kubernetes
Indexed Job's ``JOB_COMPLETION_INDEX`` (``--shard $(JOB_COMPLETION_INDEX)/4``) and of a
zero-based CI matrix. The recordings are sorted by name and dealt round-robin: recording
``k`` goes to shard ``k mod N``, so every machine computes the same split from the same list,
the shards together hold each recording exactly once, and their sizes differ by at most one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...settings import UsageError

__all__ = ["Shard", "deal", "parse_shard"]

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    index: int  # 0 <= index < count
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= I < N")

    def take(self, items: Sequence[T]) -> list[T]:
        """This shard's items of ``items`` (already in their sorted order)."""
        return list(items[self.index :: self.count])

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"I/N"`` (0-based ``I``) → :class:`Shard`; anything else is one :class:`UsageError` line (exit 2)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None:
        raise UsageError(f"--shard takes I/N with 0 <= I < N (0-based, e.g. 0/4), not {text!r}")
    index, count = int(match[1]), int(match[2])
    if count < 1 or index >= count:
        raise UsageError(f"--shard {text}: I must be 0 to {max(count - 1, 0)} for N = {count} (shards are "
                                 "0-based)" if count >= 1 else f"--shard {text}: N must be at least 1")
    return Shard(index, count)


def deal(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` dealt round-robin into at most ``parts`` non-empty lists (the shard rule, once more)."""
    parts = max(1, min(parts, len(items)))
    return [Shard(i, parts).take(items) for i in range(parts)]
