"""GPT-Live wire events: a vocabulary of its own, apart from Realtime's (``voxline.realtime.events``).

The Live interface (``/v1/live/sessions``) is a second protocol beside Realtime
(docs/protocol.md §14): no items, no responses for speech, no truncate. Its server
events carry ``start_ms`` / ``end_ms`` on the session's timeline; output audio on the
primary WebSocket carries none. Every model keeps keys it does not declare, and a server
event of a type not listed here is kept whole as :class:`LiveUnknownEvent`, never an error.
"""

from __future__ import annotations

import json
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from voxline.base.json_text import escapes_surrogate, whole_characters

from ..errors import RemoteProtocolError
from ..events.common import WireModel

__all__ = [
    "CLOSE_REASONS", "LIVE_CLIENT_EVENT_TYPES", "MAX_TIMELINE_MS", "LIVE_SERVER_EVENT_TYPES", "LiveClientEvent", "LiveServerEvent",
    "LiveUnknownEvent", "parse_live_server", "dump_live",
]

MAX_TIMELINE_MS = 48 * 3600 * 1000
"""The latest instant a timeline value may name: a session expires after about two hours, so a
value beyond two days (or one below zero) is a malformed frame, not a place on the timeline."""
TimelineMs = Annotated[int, Field(ge=0, le=MAX_TIMELINE_MS)]

CloseReason = Literal["close_requested", "expired", "content", "remote_hangup", "connection_lost"]
CLOSE_REASONS: tuple[str, ...] = typing.get_args(CloseReason)


# ---------------------------------------------------------------------------- nested objects
class LiveSessionResource(WireModel):
    """The resolved session as ``session.started`` / ``updated`` / ``closed`` carry it."""

    id: str
    model: str
    expires_at: int
    status: str = "active"
    instructions: str | None = None
    audio: dict[str, Any] | None = None
    delegation: dict[str, Any] | None = None
    store: bool | None = None


class LiveUsage(WireModel):
    seconds: float
    active_seconds: int | None = None
    paused_seconds: int | None = None


class LiveErrorDetail(WireModel):
    type: str
    code: str
    message: str
    param: str | None = None
    client_event_id: str | None = None


class LiveDelegation(WireModel):
    """Metadata of delegated work: an id and where it went, never the task's text."""

    id: str
    target: Literal["client", "responses", "decisions"]
    type: Literal["delegation"] = "delegation"
    response_id: str | None = None


class _Server(WireModel):
    event_id: str
    client_event_id: str | None = None


class _Timed(_Server):
    start_ms: TimelineMs
    end_ms: TimelineMs

    @model_validator(mode="after")
    def _forwards(self) -> _Timed:
        if self.end_ms < self.start_ms:
            raise ValueError(f"end_ms {self.end_ms} is before start_ms {self.start_ms}")
        return self


# ---------------------------------------------------------------------------- server events
class LiveSessionStarted(_Server):
    type: Literal["session.started"]
    session: LiveSessionResource


class LiveSessionUpdated(_Server):
    type: Literal["session.updated"]
    session: LiveSessionResource


class LiveSessionClosed(_Server):
    """The session finished finalizing; ``reason`` says why."""

    type: Literal["session.closed"]
    reason: CloseReason
    session: LiveSessionResource
    usage: LiveUsage


class LiveInputAudioReflected(WireModel):
    """The caller's audio reflected to a sideband (PCM16 24 kHz); not an acknowledgement."""

    type: Literal["session.input_audio.append"]
    audio: str


class LiveInputAudioMuted(_Server):
    type: Literal["session.input_audio.muted"]


class LiveInputAudioUnmuted(_Server):
    type: Literal["session.input_audio.unmuted"]


class LiveInputTranscriptDelta(_Timed):
    """The user's words for ``[start_ms, end_ms)`` of the session timeline."""

    type: Literal["session.input_transcript.delta"]
    delta: str


class LiveOutputTranscriptDelta(_Timed):
    """The assistant's words for ``[start_ms, end_ms)`` of the session timeline."""

    type: Literal["session.output_transcript.delta"]
    delta: str


class LiveOutputAudioDelta(WireModel):
    """Output audio; times only on a sideband's reflection (and no ``event_id`` at all)."""

    type: Literal["session.output_audio.delta"]
    delta: str
    start_ms: TimelineMs | None = None
    end_ms: TimelineMs | None = None


class LiveFixturePlaying(_Server):
    type: Literal["session.output_audio.fixture.playing"]


class LiveFixturePlayed(_Server):
    type: Literal["session.output_audio.fixture.played"]


class LiveInstructionsAppended(_Timed):
    type: Literal["session.instructions.appended"]


class LiveThinkingAppended(_Timed):
    type: Literal["session.thinking.appended"]


class LiveCommentaryAppended(_Timed):
    type: Literal["session.commentary.appended"]


class LiveDelegationCreated(_Server):
    type: Literal["session.delegation.created"]
    delegation: LiveDelegation
    offset_ms: TimelineMs


class LiveUsageUpdated(_Server):
    type: Literal["session.usage.updated"]
    usage: LiveUsage
    context_window: dict[str, Any] | None = None


class LiveResponseEvent(_Server):
    """A Responses streaming event from the delegated backend, nested whole in ``event``."""

    type: Literal["response.event"]
    event: dict[str, Any]
    delegation_id: str | None = None


class LiveDecisionEvent(_Server):
    type: Literal["decision.event"]
    event: dict[str, Any]
    delegation_id: str | None = None
    source_event_id: str | None = None
    source_event_type: str | None = None
    trigger_id: str | None = None


class LiveDecisionItemCreated(_Server):
    type: Literal["decision.item.created"]
    item: dict[str, Any]


class LiveDecisionItemDeleted(_Server):
    type: Literal["decision.item.deleted"]
    item_id: str


class LiveInfo(_Server):
    type: Literal["info"]
    code: str
    message: str


class LiveError(_Server):
    type: Literal["error"]
    error: LiveErrorDetail


class LiveDtmfReceived(WireModel):
    type: Literal["transport.dtmf.received"]
    event: str
    event_id: str


class LiveDtmfSendNotice(WireModel):
    """The older name of ``transport.dtmf.sent``, still in saved events."""

    type: Literal["transport.dtmf.send"]
    event: str
    event_id: str
    client_event_id: str | None = None


class LiveDtmfSent(WireModel):
    type: Literal["transport.dtmf.sent"]
    event: str
    event_id: str
    client_event_id: str | None = None


class LiveTransportRinging(WireModel):
    type: Literal["transport.ringing"]
    event_id: str
    session_id: str


class LiveTransportAnswered(WireModel):
    type: Literal["transport.answered"]
    event_id: str
    session_id: str


class LiveTransportFailed(WireModel):
    type: Literal["transport.failed"]
    event_id: str
    session_id: str
    error: dict[str, Any]


class LiveSessionPaused(_Server):
    """A sideband's (or permitted data channel's) notice: the idle timeout paused inference."""

    type: Literal["session.paused"]


class LiveSessionResumed(_Server):
    type: Literal["session.resumed"]


_SERVER_MODELS = (
    LiveSessionStarted, LiveSessionUpdated, LiveSessionClosed, LiveInputAudioReflected, LiveInputAudioMuted,
    LiveInputAudioUnmuted, LiveInputTranscriptDelta, LiveOutputTranscriptDelta, LiveOutputAudioDelta,
    LiveFixturePlaying, LiveFixturePlayed, LiveInstructionsAppended, LiveThinkingAppended, LiveCommentaryAppended,
    LiveDelegationCreated, LiveUsageUpdated, LiveResponseEvent, LiveDecisionEvent, LiveDecisionItemCreated,
    LiveDecisionItemDeleted, LiveInfo, LiveError, LiveDtmfReceived, LiveDtmfSendNotice, LiveDtmfSent,
    LiveTransportRinging, LiveTransportAnswered, LiveTransportFailed,
)
_SIDEBAND_ONLY = (LiveSessionPaused, LiveSessionResumed)

LiveServerEvent = Annotated[
    Union[
        LiveSessionStarted, LiveSessionUpdated, LiveSessionClosed, LiveInputAudioReflected, LiveInputAudioMuted,
        LiveInputAudioUnmuted, LiveInputTranscriptDelta, LiveOutputTranscriptDelta, LiveOutputAudioDelta,
        LiveFixturePlaying, LiveFixturePlayed, LiveInstructionsAppended, LiveThinkingAppended,
        LiveCommentaryAppended, LiveDelegationCreated, LiveUsageUpdated, LiveResponseEvent, LiveDecisionEvent,
        LiveDecisionItemCreated, LiveDecisionItemDeleted, LiveInfo, LiveError, LiveDtmfReceived,
        LiveDtmfSendNotice, LiveDtmfSent, LiveTransportRinging, LiveTransportAnswered, LiveTransportFailed,
        LiveSessionPaused, LiveSessionResumed,
    ],
    Field(discriminator="type"),
]


# ---------------------------------------------------------------------------- client events
class _Client(WireModel):
    event_id: str | None = None


class LiveStart(_Client):
    """The first message on a primary WebSocket (or on a fork's, with overrides only)."""

    type: Literal["session.start"] = "session.start"
    session: dict[str, Any]


class LiveUpdate(_Client):
    type: Literal["session.update"] = "session.update"
    session: dict[str, Any]


class LiveClose(_Client):
    type: Literal["session.close"] = "session.close"


class LiveAudioAppend(_Client):
    type: Literal["session.input_audio.append"] = "session.input_audio.append"
    audio: str


class LiveMute(_Client):
    type: Literal["session.input_audio.mute"] = "session.input_audio.mute"


class LiveUnmute(_Client):
    type: Literal["session.input_audio.unmute"] = "session.input_audio.unmute"


class _Append(_Client):
    content: str
    delegation_id: str | None = Field(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self.model_fields_set.add("delegation_id")  # required on the wire, even when null


class LiveInstructionsAppend(_Append):
    type: Literal["session.instructions.append"] = "session.instructions.append"


class LiveThinkingAppend(_Append):
    type: Literal["session.thinking.append"] = "session.thinking.append"


class LiveCommentaryAppend(_Append):
    type: Literal["session.commentary.append"] = "session.commentary.append"


class LiveFixturePlay(_Client):
    """A whole audio fixture (PCM16 24 kHz) played through the session's output."""

    type: Literal["session.output_audio.fixture.play"] = "session.output_audio.fixture.play"
    audio: str


class LiveResponseCreate(_Client):
    type: Literal["response.create"] = "response.create"


class LiveResponseItemCreate(_Client):
    type: Literal["response.item.create"] = "response.item.create"
    item: dict[str, Any]


class LiveDecisionCreate(WireModel):
    type: Literal["decision.create"] = "decision.create"
    event_id: str


class LiveDecisionItemCreate(_Client):
    type: Literal["decision.item.create"] = "decision.item.create"
    item: dict[str, Any]


class LiveDecisionItemDelete(_Client):
    type: Literal["decision.item.delete"] = "decision.item.delete"
    item_id: str


class LiveDtmfSend(_Client):
    """A sideband's command on a SIP call: one DTMF key."""

    type: Literal["transport.dtmf.send"] = "transport.dtmf.send"
    event: str


_CLIENT_MODELS = (
    LiveStart, LiveUpdate, LiveClose, LiveAudioAppend, LiveMute, LiveUnmute, LiveInstructionsAppend,
    LiveThinkingAppend, LiveCommentaryAppend, LiveFixturePlay, LiveResponseCreate, LiveResponseItemCreate,
    LiveDecisionCreate, LiveDecisionItemCreate, LiveDecisionItemDelete,
)

LiveClientEvent = Union[
    LiveStart, LiveUpdate, LiveClose, LiveAudioAppend, LiveMute, LiveUnmute, LiveInstructionsAppend,
    LiveThinkingAppend, LiveCommentaryAppend, LiveFixturePlay, LiveResponseCreate, LiveResponseItemCreate,
    LiveDecisionCreate, LiveDecisionItemCreate, LiveDecisionItemDelete, LiveDtmfSend,
]


def _type_of(model: type[WireModel]) -> str:
    name: str = typing.get_args(model.model_fields["type"].annotation)[0]
    return name


LIVE_SERVER_EVENT_TYPES = frozenset(_type_of(m) for m in _SERVER_MODELS)
"""The 28 server event types of a primary connection (a sideband adds ``session.paused`` / ``resumed``)."""
LIVE_SIDEBAND_EVENT_TYPES = LIVE_SERVER_EVENT_TYPES | {_type_of(m) for m in _SIDEBAND_ONLY}
LIVE_CLIENT_EVENT_TYPES = frozenset(_type_of(m) for m in _CLIENT_MODELS)
"""The 15 client event types (a sideband may also send ``transport.dtmf.send``)."""


class LiveUnknownEvent(WireModel):
    """A server event of a type this vocabulary does not know: kept whole, never an error."""

    type: str
    raw: dict[str, Any]


_SERVER = TypeAdapter(LiveServerEvent)


def parse_live_server(text: str | bytes) -> LiveServerEvent | LiveUnknownEvent:
    """One server frame as a typed event; unknown types pass through raw; half a character (a lone surrogate
    escaped in a string) becomes U+FFFD.

    Raises :class:`~voxline.realtime.errors.RemoteProtocolError` (one line) for a frame that
    is not a JSON object with a string ``type``, or a known type missing what it needs.
    """
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise RemoteProtocolError(f"a Live server frame is not JSON: {exc}") from None
    except RecursionError:
        raise RemoteProtocolError("a Live server frame is nested too deeply to read") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise RemoteProtocolError("a Live server frame is not an object with a string 'type'")
    if escapes_surrogate(text):  # could never be sent back (a session restored after a drop repeats what was said)
        try:
            raw = whole_characters(raw)
        except RecursionError:  # as deep as json.loads goes, deeper than this walk may
            raise RemoteProtocolError("a Live server frame is nested too deeply to read") from None
    kind = raw["type"]
    if kind not in LIVE_SIDEBAND_EVENT_TYPES:
        return LiveUnknownEvent(type=kind, raw=raw)
    try:
        return _SERVER.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "?"
        raise RemoteProtocolError(f"malformed Live {kind}: {where}: {first['msg']}") from None


def dump_live(event: LiveClientEvent) -> str:
    """One client event as its wire JSON."""
    return json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
