"""The heard-text estimate of a cut assistant item (docs/protocol.md §8).

The service keeps no transcript of a truncated item, and the transcript it streams has no
word timings, so the mirror estimates what the listener heard. Two ways, the better one
that the item's events allow:

* ``"arrival"`` — each transcript delta is placed on the item's audio timeline at the
  audio received when it arrived (its *mark*). Text whose mark is within what the
  listener heard counts as heard. Used when the deltas came spread over the audio (at
  least two different marks), as both the service and the local server stream them.
* ``"duration"`` — the share ``heard_ms / total_ms`` of the characters, rounded to the
  nearest word end, for text that came all at once (or only with ``.done``).

Either way the result is a prefix of the text and an estimate (``"all"``: the item was
not cut, nothing is estimated).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["HeardEstimate", "HeardMethod", "TextMark", "estimate_heard", "estimate_heard_text"]

_WORD_END = re.compile(r"\S(?=\s|$)")

HeardMethod = Literal["all", "arrival", "duration"]
TextMark = tuple[int, float]  # (character offset where a transcript delta starts, audio ms received when it came)


@dataclass(frozen=True, slots=True)
class HeardEstimate:
    """The text the listener heard of an item, and how it was found (``estimate`` unless ``"all"``)."""

    text: str
    method: HeardMethod

    @property
    def estimate(self) -> bool:
        return self.method != "all"


def estimate_heard_text(text: str, heard_ms: float, total_ms: float) -> str:
    """The first ``heard_ms / total_ms`` of ``text``, cut at the nearest word end.

    Nothing is heard when ``heard_ms`` or ``total_ms`` is not positive; all of it when
    ``heard_ms >= total_ms``.
    """
    if heard_ms <= 0 or total_ms <= 0 or not text:
        return ""
    if heard_ms >= total_ms:
        return text
    target = len(text) * heard_ms / total_ms
    ends = [0] + [match.end() for match in _WORD_END.finditer(text)]
    best = min(ends, key=lambda end: (abs(end - target), end))
    return text[:best].rstrip()


def _by_arrival(text: str, marks: Sequence[TextMark], heard_ms: float) -> str:
    """Text up to the first delta whose mark lies beyond ``heard_ms`` (found by bisection: marks come in order)."""
    first = bisect.bisect_right(marks, heard_ms, key=_mark_ms)
    cut = max(0, marks[first][0]) if first < len(marks) else len(text)
    return text[:cut].rstrip()


def _mark_ms(mark: TextMark) -> float:
    return mark[1]


def _spread(marks: Sequence[TextMark]) -> bool:
    """At least two different marks; stops at the first that differs (a cut must not walk every word)."""
    if not marks:
        return False
    first = marks[0][1]
    return any(ms != first for _offset, ms in marks)


def estimate_heard(text: str, marks: Sequence[TextMark], heard_ms: float | None, total_ms: float) -> HeardEstimate:
    """What was heard of ``text`` when the listener heard ``heard_ms`` (None: not cut) of ``total_ms``.

    ``marks`` are in arrival order: offsets and milliseconds both never decrease.
    """
    if heard_ms is None:
        return HeardEstimate(text, "all")
    if _spread(marks):
        return HeardEstimate(_by_arrival(text, marks, heard_ms) if heard_ms > 0 else "", "arrival")
    return HeardEstimate(estimate_heard_text(text, heard_ms, total_ms), "duration")
