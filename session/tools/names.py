"""The tool names a session offers, as an application gives them: checked once, read once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from voxline.realtime.errors import ConfigurationError

__all__ = ["chosen_tools"]


def chosen_tools(names: Any, registered: Iterable[str]) -> list[str]:
    """``names`` (any iterable of strings, read once: a generator too) as a list, each among ``registered``;
    else one :class:`ConfigurationError` (a string is not a list of names)."""
    problem = "tools takes a list of the registry's tool names"
    if isinstance(names, str | bytes):
        raise ConfigurationError(problem)
    try:
        listed = list(names)
    except TypeError:
        raise ConfigurationError(f"{problem}, not {type(names).__name__}") from None
    if not all(isinstance(name, str) for name in listed):
        raise ConfigurationError(problem)
    unknown = sorted(set(listed) - set(registered))
    if unknown:
        raise ConfigurationError(f"no such tool: {', '.join(unknown)}")
    twice = sorted(name for name, times in Counter(listed).items() if times > 1)
    if twice:  # each would be offered twice, which no model takes
        raise ConfigurationError(f"tools names {', '.join(twice)} more than once")
    return listed
