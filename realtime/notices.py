"""Local notices: what the protocol core tells its owner besides the server's own events.

These are not wire events. They come out of :meth:`RealtimeProtocol.events` mixed
with the parsed server events, in order, so the owner sees one stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .lifecycle import ResponseStatus

__all__ = [
    "BetaProtocolDetected",
    "CommandFailed",
    "MalformedServerEvent",
    "Notice",
    "ResponseStatusChanged",
    "TruncateAdjusted",
]


@dataclass(frozen=True, slots=True)
class MalformedServerEvent:
    """A frame from the server that could not be decoded; it is reported, never fatal."""

    reason: str
    raw: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class CommandFailed:
    """An ``error`` event mapped back to the client event (by ``event_id``) that caused it.

    ``handled`` is true when the core recovered by itself (a refused ``response.create``
    queued again, a harmless ``response_cancel_not_active``, a truncate clamped).
    """

    command_type: str | None
    event_id: str | None
    code: str | None
    message: str
    handled: bool
    command: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ResponseStatusChanged:
    """A response changed status (requested → active → a terminal status)."""

    response_id: str | None
    status: ResponseStatus
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TruncateAdjusted:
    """The server had less audio than we asked to keep; the truncate was sent again at its length."""

    item_id: str
    requested_ms: int
    applied_ms: int


@dataclass(frozen=True, slots=True)
class BetaProtocolDetected:
    """The peer used a retired beta event name; voxline speaks the GA protocol only."""

    event_type: str
    ga_type: str | None


Notice = MalformedServerEvent | CommandFailed | ResponseStatusChanged | TruncateAdjusted | BetaProtocolDetected
