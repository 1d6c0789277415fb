"""When a device-less output's after-pass call can be skipped: one float, kept by whoever the call serves.

Plain data with no imports, so a sans-I/O session machine can hold it and a
:class:`~voxline.audio.clocked_output.ClockedOutput` can read it.
"""

from __future__ import annotations

import math

__all__ = ["TickGate"]


class TickGate:
    """Until when :attr:`ClockedOutput.after_read` can change nothing, in listener time.

    Whoever the call serves keeps :attr:`until` (a session: its core's quiet horizon, lowered
    to ``-inf`` by everything that could change it); the output reads it after each pass and
    makes the call only once it has passed. ``-inf``: after every pass.
    """

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = -math.inf
