"""Session events: what an application consumes from a :class:`~session.VoiceSession`.

A vocabulary of its own, apart from wire events (``voxline.realtime.events``) and protocol
notices (``voxline.realtime.notices``). Times are seconds on the session's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from voxline.audio.ledger import Cut

__all__ = [
    "AssistantAudioStarted",
    "BargeIn",
    "ConnectionLost",
    "CutAdjusted",
    "ConnectionRestored",
    "RawServerEvent",
    "ResponseFinished",
    "ResponseStarted",
    "SessionError",
    "SessionEvent",
    "SpeechStarted",
    "SpeechStopped",
    "StateChanged",
    "TranscriptDelta",
    "TranscriptDone",
]

Role = Literal["user", "assistant"]
State = Literal["idle", "listening", "thinking", "speaking"]


@dataclass(frozen=True, slots=True)
class StateChanged:
    state: State
    at: float


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The user started speaking (server VAD or local VAD)."""

    at: float
    item_id: str | None
    audio_start_ms: int | None


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    at: float
    item_id: str | None
    audio_end_ms: int | None


@dataclass(frozen=True, slots=True)
class TranscriptDelta:
    role: Role
    item_id: str
    text: str


@dataclass(frozen=True, slots=True)
class TranscriptDone:
    role: Role
    item_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    response_id: str
    at: float


@dataclass(frozen=True, slots=True)
class ResponseFinished:
    response_id: str | None
    status: str
    reason: str | None
    at: float
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class AssistantAudioStarted:
    """The first sample of an assistant item reached the listener."""

    item_id: str
    at: float
    reply_latency: float | None  # end of user speech → this instant, when known


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The user talked over the assistant; the conversation was cut where the listener was.

    ``heard_ms`` is what the listener heard of ``item_id``; ``audio_end_ms`` the value sent
    in ``conversation.item.truncate`` (``None`` if the item was deleted or nothing needed a cut).
    ``in_device_ms`` is audio already handed to the output that the abort kept from the
    listener (device buffer), ``unplayed_ms`` what was still queued.
    """

    trigger: str
    at: float
    item_id: str | None
    heard_ms: float
    received_ms: float
    audio_end_ms: int | None
    deleted: tuple[str, ...]
    cancelled: bool
    reaction_s: float  # trigger → playout silent
    in_device_ms: float = 0.0
    unplayed_ms: float = 0.0
    server_cuts: bool = False  # WebRTC: the server owns the output buffer and truncates itself
    cut: Cut | None = field(default=None, repr=False, compare=False)  # the playout's side of it
    heard_parts: tuple[tuple[str, int, float], ...] = field(default=(), repr=False, compare=False)
    """(item_id, content_index, heard_ms) of every audio part of the interrupted responses."""


@dataclass(frozen=True, slots=True)
class CutAdjusted:
    """The server had less audio of ``item_id`` than the listener heard; it was cut at its length.

    Reported, not hidden: it means audio was counted that the server never stored
    (``Audio content of N ms is already shorter than M ms``).
    """

    item_id: str
    requested_ms: int
    applied_ms: int


@dataclass(frozen=True, slots=True)
class ConnectionLost:
    code: int | None
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class ConnectionRestored:
    """A new connection carries the conversation on: ``replayed_items`` rebuilt from the mirror,
    ``resent_creates`` owed ``response.create`` sent again, ``resent_audio_ms`` of the user's
    unfinished turn appended again; ``handover`` when it replaced a connection about to expire."""

    at: float
    replayed_items: int
    resent_creates: int = 0
    resent_audio_ms: float = 0.0
    handover: bool = False


@dataclass(frozen=True, slots=True)
class SessionError:
    """A problem reported to the application; the session keeps running unless ``fatal``."""

    message: str
    code: str | None = None
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class RawServerEvent:
    """A wire event, passed through when the application asked for raw events."""

    event: Any = field(repr=False)


SessionEvent = (
    StateChanged
    | SpeechStarted
    | SpeechStopped
    | TranscriptDelta
    | TranscriptDone
    | ResponseStarted
    | ResponseFinished
    | AssistantAudioStarted
    | BargeIn
    | CutAdjusted
    | ConnectionLost
    | ConnectionRestored
    | SessionError
    | RawServerEvent
)
