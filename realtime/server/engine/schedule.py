"""A response's steps in the order they come due, each made only when it is reached.

A reply of a minute is six hundred audio chunks; building all of their steps when the response
starts cost about half a millisecond, and hundreds of sessions whose users stop talking at the same
moment start their responses in one pass of the server's loop, which then streams nothing
else. A :class:`Schedule` takes its steps from an iterator instead: a response's start makes
its first step, and each step taken makes the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Schedule", "Step"]


@dataclass(slots=True)
class Step:
    """At ``at`` on the server's clock, ``action`` makes the events of one step of output ``output``
    (None: a step of the response's own)."""

    at: float
    output: int | None
    action: Callable[[], list[dict[str, Any]]]
    audio: bool = False  # it sends a chunk of audio


class Schedule:
    """The steps of ``steps`` in their order, made as they are reached; steps of dropped outputs are skipped."""

    __slots__ = ("_dropped", "_head", "_steps")

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps = iter(steps)
        self._dropped: set[int] = set()
        self._head = self._next()

    def _next(self) -> Step | None:
        for step in self._steps:
            if step.output not in self._dropped:  # a response's own steps (output None) are never dropped
                return step
        return None

    @property
    def next_due(self) -> float | None:
        """When the next step is due, or None once there is none."""
        return None if self._head is None else self._head.at

    @property
    def head(self) -> Step | None:
        """The next step (not taken), or None once there is none."""
        return self._head

    def take_due(self, now: float) -> Step | None:
        """The next step if it is due at ``now``, else None."""
        head = self._head
        if head is None or head.at > now:
            return None
        self._head = self._next()
        return head

    def clear(self) -> None:
        """No more steps."""
        self._steps = iter(())
        self._head = None

    def drop_output(self, index: int) -> None:
        """Skip every step of output ``index`` from now on."""
        self._dropped.add(index)
        if self._head is not None and self._head.output == index:
            self._head = self._next()
