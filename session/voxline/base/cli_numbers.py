"""The one way a command-line option takes a number: an argparse ``type`` that reads it and says in one line what it
expected when it cannot (``argument --port: expected a port number 0..65535, not 'x'``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

__all__ = ["number_option"]

N = TypeVar("N", int, float)


def number_option(text: str, parse: Callable[[str], N], fits: Callable[[N], bool], expected: str) -> N:
    """``text`` as ``parse`` reads it, if it ``fits``; else :class:`argparse.ArgumentTypeError` saying "expected
    ``expected``, not 'text'" (NaN fits no range, so it is refused wherever a range is asked)."""
    try:
        value: N | None = parse(text)
    except ValueError:
        value = None
    if value is None or not fits(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}")
    return value
