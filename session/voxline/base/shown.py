"""Text as a person sees it: redacted, cut to fit a line, its control characters shown as escapes.

:func:`clip` redacts before it cuts (a secret a cut halves is no longer recognisable) and reads
only as much of a huge text as the cut needs; :func:`shown_value` is how a one-line refusal quotes a
value; :func:`printable` is what text from a server goes through before it reaches a terminal.
"""

from __future__ import annotations

import re
from typing import Any

from .redaction import longest_secret, redact

__all__ = ["SHOWN_CHARS", "clip", "printable", "shown_value"]


_SHAPE_SPAN = 256  # room for a key known by its shape (sk-…) cut at the end of what was read
_WORD = re.compile(r"\S+")


def clip(text: str, limit: int, *, flat: bool = False) -> str:
    """``text`` fit to show: redacted, then cut to at most ``limit`` characters (the last an ellipsis when cut);
    with ``flat``, its whitespace (line breaks too) collapsed to single spaces first.

    Redacted before it is cut: a secret a cut halves is no longer recognisable, and its first part was shown.
    Only as much of ``text`` is read as the cut needs (a message of 100 MB is not all redacted to show 300
    characters): enough that once redacted at least as much is left past the cut as a registered secret is
    long, plus room for a key known by its shape, so nothing the cut keeps can begin a secret the reading
    stopped in."""
    budget = 4 * limit + _SHAPE_SPAN
    while True:
        shown, more = _first_words(text, budget) if flat else (text[:budget], len(text) > budget)
        shown = redact(shown)
        if not more or len(shown) >= limit + longest_secret() + _SHAPE_SPAN:
            break
        budget *= 4
    return shown if len(shown) <= limit and not more else shown[: limit - 1] + "…"


SHOWN_CHARS = 80
"""Characters of a text value a refusal shows before it says how long the rest is."""


def shown_value(value: Any) -> str:
    """A value as a one-line refusal shows it: a long text cut (its length said), any other its ``repr`` clipped and
    redacted, and one whose ``repr`` fails by its type."""
    if isinstance(value, (str, bytes)) and len(value) > SHOWN_CHARS:
        return f"{value[:SHOWN_CHARS]!r}… ({len(value)} long)"
    try:
        return clip(repr(value), 2 * SHOWN_CHARS, flat=True)
    except Exception:  # an application's object: its __repr__ is its own code
        return f"a {type(value).__name__}"


def _first_words(text: str, budget: int) -> tuple[str, bool]:
    """The words of ``text`` joined by single spaces, up to about ``budget`` characters (the last word read cut
    there), and whether any of ``text`` was left unread."""
    words: list[str] = []
    size = 0
    for match in _WORD.finditer(text):
        start = match.start()
        end = min(match.end(), start + budget - size)
        words.append(text[start:end])
        size += end - start + 1
        if size > budget or end < match.end():
            return " ".join(words), True
    return " ".join(words), False


_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A), *range(0xD800, 0xE000))
} | {c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)}
"""Characters a terminal acts on (escape sequences, carriage return, bell, backspace), that break a
line where a reader splits lines (U+2028, U+2029), that turn the direction of the text around, or
that no UTF-8 stream can write (lone surrogates: a file name's bytes that are not UTF-8, as Python
decodes them, shown as those bytes), each with the escape that shows it instead."""


def printable(text: str) -> str:
    """``text`` for one line of a terminal: every control character shown as its escape (``\\x1b``).

    Text from a server (a transcript, an error message, a close reason) goes through it before it is
    printed, so that what the server sends can neither move the cursor, clear the screen or rename
    the window, nor hide or reorder what the line says."""
    return text.translate(_CONTROLS)
