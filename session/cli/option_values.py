"""Options whose value may be left out (``nargs="?"``): which words after one are its value.

``voxline replay --aec a.wav`` means the default canceller and the input ``a.wav``; argparse alone takes
``a.wav`` as the canceller's name. An option with choices takes a following word as its value only if
it is one of them; one without choices says what its values look like with :func:`optional_value`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["may_be_value", "optional_value"]

_TEST = "voxline_may_be"


def optional_value(action: argparse.Action, may_be: Callable[[str], bool]) -> argparse.Action:
    """Mark ``action`` (``nargs="?"``, no choices): a word after it that ``may_be`` refuses is the next input."""
    setattr(action, _TEST, may_be)
    return action


def may_be_value(action: argparse.Action, word: str) -> bool:
    """Whether ``word``, after ``action``'s option, may be its value."""
    may_be = getattr(action, _TEST, None)
    if callable(may_be):
        return bool(may_be(word))
    return action.choices is None or word in action.choices
