"""What a session reports of its tool calls: a tool started, a call was answered.

Plain values, apart from the runner that makes them, so that the session machine can take
them without the runner's asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolEvent", "ToolFinished", "ToolStarted"]


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool function was invoked with these decoded arguments."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    at: float | None = None
    """The listener time the session took it (s): set by the session, None as the runner makes it."""


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A call was answered. ``ok`` is false for every error output; ``duration_s`` is 0 if it never ran."""

    call_id: str
    name: str
    output: str
    ok: bool
    duration_s: float
    at: float | None = None
    """The listener time the call was answered (s): set by the session, None as the runner makes it."""


ToolEvent = ToolStarted | ToolFinished
