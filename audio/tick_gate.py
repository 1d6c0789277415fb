"""When a device-less output's after-pass call can be skipped: one float, kept by whoever the call serves.

Plain data with no imports, so a sans-I/O session machine can hold it and a
:class:`~voxline.audio.clocked_output.ClockedOutput` can read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["TickGate"]


class TickGate:
    """Until when :attr:`ClockedOutput.after_read` can change nothing, in listener time.

    Whoever the call serves keeps :attr:`until` (a session: its core's quiet horizon, lowered
    to ``-inf`` by everything that could change it); the output reads it after each pass and
    makes the call only once it has passed. ``-inf``: after every pass. An output that sleeps
    while nothing plays sets :attr:`on_lower`, to be woken when :attr:`until` comes sooner.
    """

    __slots__ = ("_until", "on_lower")

    def __init__(self) -> None:
        self._until = -math.inf
        self.on_lower: Callable[[float], None] | None = None
        """Called with the new :attr:`until` whenever it is set lower than it was."""

    @property
    def until(self) -> float:
        return self._until

    @until.setter
    def until(self, value: float) -> None:
        lower = value < self._until
        self._until = value
        if lower and self.on_lower is not None:
            self.on_lower(value)
