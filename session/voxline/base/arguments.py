"""Checks for the arguments of constructors: one line naming the argument and what it takes.

Each check returns the value it accepted and raises :class:`TypeError` for a value of the
wrong kind (``True`` is not a number here, nor ``"8765"`` a port) or :class:`ValueError` for
one out of range; NaN is never in range, and infinity only where ``finite=False`` says so.
A configuration object that reports its own error type catches both (:func:`as_error`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "CLOCK_METHODS", "as_error", "clock_like", "flag", "has_methods", "having", "real", "text", "unicode_text", "whole",
]

CLOCK_METHODS = ("now", "wall", "sleep_until")
"""What a clock is checked for by its shape (:class:`voxline.base.clock.Clock`, which imports this module)."""


def real(value: Any, what: str, *, low: float = -math.inf, high: float = math.inf, above: bool = False,
         finite: bool = True) -> float:
    """A number (int or float, not bool) in ``[low, high]`` (``(low, high]`` with ``above``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} takes a number, not {type(value).__name__}")
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"{what} takes a finite number, not {value}")
    if value < low or (above and value == low) or value > high:
        raise ValueError(f"{what} takes a number {_range(low, high, above)}, not {value}")
    return value


def whole(value: Any, what: str, *, low: int | None = None, high: int | None = None) -> int:
    """An int (not bool, not a float with nothing after the point) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} takes a whole number, not {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        lo = -math.inf if low is None else low
        hi = math.inf if high is None else high
        raise ValueError(f"{what} takes a whole number {_range(lo, hi, False)}, not {value}")
    return value


def text(value: Any, what: str, *, empty: bool = False) -> str:
    """A string, not empty unless ``empty``."""
    if not isinstance(value, str):
        raise TypeError(f"{what} takes a string, not {type(value).__name__}")
    if not value and not empty:
        raise ValueError(f"{what} takes a non-empty string")
    return value


def unicode_text(value: str, what: str) -> str:
    """``value`` if it is text that UTF-8 and JSON can carry: no lone surrogate (``"\\ud83d"`` alone), such as
    text decoded from broken JSON or a browser's half of an emoji may hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} cannot be sent: character {exc.start} is a lone surrogate "
                         f"({value[exc.start]!r}), half of a character") from None
    return value


def flag(value: Any, what: str) -> bool:
    """``True`` or ``False`` (not a truthy ``"no"``)."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} takes True or False, not {type(value).__name__}")
    return value


def has_methods(value: Any, *names: str) -> bool:
    """True when ``value`` has a callable attribute of each of ``names`` (a protocol checked by its shape)."""
    return all(callable(getattr(value, name, None)) for name in names)


def having(value: Any, what: str, takes: str, *names: str) -> Any:
    """``value`` if it has the methods ``names``; else ``TypeError``: ``{what} takes {takes}, not …``."""
    if not has_methods(value, *names):
        raise TypeError(f"{what} takes {takes}, not {type(value).__name__}")
    return value


def clock_like(value: Any, what: str = "clock") -> Any:
    """``value`` if it is a clock by its shape (:data:`CLOCK_METHODS`)."""
    return having(value, what, "a Clock (RealClock, VirtualClock)", *CLOCK_METHODS)


@contextmanager
def as_error(error: type[Exception], owner: str) -> Iterator[None]:
    """Inside, a check's :class:`TypeError` or :class:`ValueError` becomes one ``error`` line
    starting with ``owner`` (``ServerConfig: port takes…``)."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        raise error(f"{owner}: {exc}") from None


def _range(low: float, high: float, above: bool) -> str:
    """``≥ 0``, ``> 0 and ≤ 1``…"""
    bounds = ([f"{'>' if above else '≥'} {_n(low)}"] if not math.isinf(low) else []) + \
        ([f"≤ {_n(high)}"] if not math.isinf(high) else [])
    return " and ".join(bounds)


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
