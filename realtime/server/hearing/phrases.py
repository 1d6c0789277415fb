"""Which of a scenario's phrases an utterance contains: words compared loosely, in order.

Recognised text and phrases are reduced to lowercase words (punctuation dropped, the digits
0–20 spelled out, since a recogniser writes "2" where a scenario says "two"). A phrase is heard
when its words occur one after another in the utterance; two words count as the same when they
are equal or, for words of four letters or more, differ by at most one letter in five (a
recogniser's "whether" for "weather"). Pure functions, no model.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["first_heard", "heard", "words"]

_WORD = re.compile(r"[a-z0-9']+")
_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()
_SIMILAR = 0.8


def words(text: str) -> list[str]:
    """``text`` as lowercase words, digits 0–20 spelled out."""
    out = []
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if word.isdigit() and int(word) <= 20:
            word = _NUMBERS[int(word)]
        if word:
            out.append(word)
    return out


def _same(said: str, expected: str) -> bool:
    if said == expected:
        return True
    if min(len(said), len(expected)) < 4:
        return False
    return difflib.SequenceMatcher(None, said, expected).ratio() >= _SIMILAR


def heard(phrase: str, text: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` (an empty phrase never does)."""
    wanted, said = words(phrase), words(text)
    if not wanted:
        return False
    return any(all(_same(said[start + i], w) for i, w in enumerate(wanted))
               for start in range(len(said) - len(wanted) + 1))


def first_heard(choices: Sequence[Sequence[str]], text: str) -> int | None:
    """The index of the first choice with a phrase heard in ``text``, or ``None``."""
    for index, phrases in enumerate(choices):
        if any(heard(phrase, text) for phrase in phrases):
            return index
    return None
