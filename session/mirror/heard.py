"""The heard-text estimate of a cut assistant item (PROTOCOL.md §5, truncation).

The service keeps no transcript of a truncated item, and the transcript it streamed has
no word timings, so the mirror estimates the heard text proportionally: the listener
heard ``heard_ms`` of ``total_ms`` of audio, hence about that share of the characters,
rounded to the nearest word boundary.
"""

from __future__ import annotations

import re

__all__ = ["estimate_heard_text"]

_WORD_END = re.compile(r"\S(?=\s|$)")


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
