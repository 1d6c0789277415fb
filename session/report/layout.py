"""Where the timeline's labels go: each takes the first of its candidate places that is free.

A label's box is estimated from its text (a generous width per character, so that real fonts
fit inside it); a place is free when the box stays inside its bounds (the plot, or the bar it
labels) and meets no box placed before nor any blocked area (the barge-in lines). A label
with no free place is left out; what it said stays in the element's tooltip and the tables.
Placing is in time order and first come, first served, so the same report always gets the
same picture.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Box", "Label", "Placer", "text_width"]

_EM = {False: 0.66, True: 0.72}  # width per character, in font sizes (regular, bold): wide enough for DejaVu Sans
_ASCENT, _DESCENT = 0.95, 0.3  # of the font size, above and below the baseline
_GAP = 2.0  # between two labels, px


def text_width(text: str, size: float, bold: bool = False) -> float:
    return len(text) * size * _EM[bold]


@dataclass(frozen=True)
class Box:
    x1: float
    y1: float
    x2: float
    y2: float

    def meets(self, other: Box) -> bool:
        return (self.x1 < other.x2 + _GAP and other.x1 < self.x2 + _GAP
                and self.y1 < other.y2 and other.y1 < self.y2)

    def inside(self, lo: float, hi: float) -> bool:
        return lo <= self.x1 and self.x2 <= hi


@dataclass(frozen=True)
class Label:
    """A text at (``x``, baseline ``y``), anchored ``start``, ``middle`` or ``end``; ``within``: the x range it must
    stay in (default: the placer's)."""

    text: str
    x: float
    y: float
    anchor: str = "start"
    size: float = 12.0
    bold: bool = False
    within: tuple[float, float] | None = None

    @property
    def box(self) -> Box:
        width = text_width(self.text, self.size, self.bold)
        x1 = {"start": self.x, "middle": self.x - width / 2, "end": self.x - width}[self.anchor]
        return Box(x1, self.y - self.size * _ASCENT, x1 + width, self.y + self.size * _DESCENT)


class Placer:
    """The boxes taken so far within ``[left, right]``."""

    def __init__(self, left: float, right: float) -> None:
        self.left, self.right = left, right
        self._taken: list[Box] = []

    def block(self, box: Box) -> None:
        """An area no label may cover (a line drawn on the plot)."""
        self._taken.append(box)

    def place(self, candidates: list[Label]) -> Label | None:
        """The first free candidate, now taken; ``None`` when none is."""
        for label in candidates:
            box = label.box
            lo, hi = label.within or (self.left, self.right)
            if box.inside(max(lo, self.left), min(hi, self.right)) and not any(box.meets(t) for t in self._taken):
                self._taken.append(box)
                return label
        return None
