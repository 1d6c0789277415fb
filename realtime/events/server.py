"""GA server events about the session, the conversation and the audio buffers (docs/protocol.md §5).

Response events are in :mod:`.server_response`, MCP events in :mod:`.server_mcp`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from .common import ConversationInfo, ErrorDetail, ErrorInfo, Item, RateLimit, SessionConfig, WireModel

__all__ = [
    "ConversationCreated",
    "ConversationItemAdded",
    "ConversationItemCreated",
    "ConversationItemDeleted",
    "ConversationItemDone",
    "ConversationItemInputAudioTranscriptionCompleted",
    "ConversationItemInputAudioTranscriptionDelta",
    "ConversationItemInputAudioTranscriptionFailed",
    "ConversationItemInputAudioTranscriptionSegment",
    "ConversationItemRetrieved",
    "ConversationItemTruncated",
    "ErrorEvent",
    "InputAudioBufferCleared",
    "InputAudioBufferCommitted",
    "InputAudioBufferDtmfEventReceived",
    "InputAudioBufferSpeechStarted",
    "InputAudioBufferSpeechStopped",
    "InputAudioBufferTimeoutTriggered",
    "OutputAudioBufferCleared",
    "OutputAudioBufferStarted",
    "OutputAudioBufferStopped",
    "RateLimitsUpdated",
    "ServerEventBase",
    "SessionCreated",
    "SessionUpdated",
]


class ServerEventBase(WireModel):
    """Fields every server event has. ``beta`` marks a type only the retired beta protocol sends."""

    beta: ClassVar[bool] = False
    event_id: str | None = None


class ErrorEvent(ServerEventBase):
    """``error``: a command failed or the session hit a limit (docs/protocol.md §10)."""

    type: Literal["error"] = "error"
    error: ErrorDetail


class SessionCreated(ServerEventBase):
    """``session.created``: the first event of every connection."""

    type: Literal["session.created"] = "session.created"
    session: SessionConfig


class SessionUpdated(ServerEventBase):
    """``session.updated``: the full effective configuration after a ``session.update``."""

    type: Literal["session.updated"] = "session.updated"
    session: SessionConfig


class ConversationCreated(ServerEventBase):
    """``conversation.created``: the default conversation exists."""

    type: Literal["conversation.created"] = "conversation.created"
    conversation: ConversationInfo


class ConversationItemAdded(ServerEventBase):
    """``conversation.item.added``: an item joined the conversation after ``previous_item_id``."""

    type: Literal["conversation.item.added"] = "conversation.item.added"
    item: Item
    previous_item_id: str | None = None


class ConversationItemDone(ServerEventBase):
    """``conversation.item.done``: an item is final (audio bytes left out)."""

    type: Literal["conversation.item.done"] = "conversation.item.done"
    item: Item
    previous_item_id: str | None = None


class ConversationItemCreated(ServerEventBase):
    """``conversation.item.created``: the beta name of ``added``; still typed by the SDK."""

    beta: ClassVar[bool] = True
    type: Literal["conversation.item.created"] = "conversation.item.created"
    item: Item
    previous_item_id: str | None = None


class ConversationItemRetrieved(ServerEventBase):
    """``conversation.item.retrieved``: answer to ``conversation.item.retrieve``."""

    type: Literal["conversation.item.retrieved"] = "conversation.item.retrieved"
    item: Item


class ConversationItemTruncated(ServerEventBase):
    """``conversation.item.truncated``: an assistant audio part was cut at ``audio_end_ms``."""

    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    item_id: str
    content_index: int
    audio_end_ms: int


class ConversationItemDeleted(ServerEventBase):
    """``conversation.item.deleted``."""

    type: Literal["conversation.item.deleted"] = "conversation.item.deleted"
    item_id: str


class ConversationItemInputAudioTranscriptionDelta(ServerEventBase):
    """``conversation.item.input_audio_transcription.delta``: partial user transcript."""

    type: Literal["conversation.item.input_audio_transcription.delta"] = (
        "conversation.item.input_audio_transcription.delta"
    )
    item_id: str
    content_index: int | None = None
    delta: str | None = None
    logprobs: list[dict[str, Any]] | None = None


class ConversationItemInputAudioTranscriptionCompleted(ServerEventBase):
    """``conversation.item.input_audio_transcription.completed``: the user's words, final."""

    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed"
    )
    item_id: str
    content_index: int
    transcript: str
    usage: dict[str, Any] | None = None
    logprobs: list[dict[str, Any]] | None = None


class ConversationItemInputAudioTranscriptionFailed(ServerEventBase):
    """``conversation.item.input_audio_transcription.failed``."""

    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    item_id: str
    content_index: int
    error: ErrorInfo


class ConversationItemInputAudioTranscriptionSegment(ServerEventBase):
    """``conversation.item.input_audio_transcription.segment``: a diarized span of speech."""

    type: Literal["conversation.item.input_audio_transcription.segment"] = (
        "conversation.item.input_audio_transcription.segment"
    )
    id: str
    item_id: str
    content_index: int
    text: str
    speaker: str
    start: float
    end: float


class InputAudioBufferCommitted(ServerEventBase):
    """``input_audio_buffer.committed``: buffered audio became user item ``item_id``."""

    type: Literal["input_audio_buffer.committed"] = "input_audio_buffer.committed"
    item_id: str
    previous_item_id: str | None = None


class InputAudioBufferCleared(ServerEventBase):
    """``input_audio_buffer.cleared``."""

    type: Literal["input_audio_buffer.cleared"] = "input_audio_buffer.cleared"


class InputAudioBufferSpeechStarted(ServerEventBase):
    """``input_audio_buffer.speech_started``: server VAD heard speech (the barge-in trigger)."""

    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int
    item_id: str


class InputAudioBufferSpeechStopped(ServerEventBase):
    """``input_audio_buffer.speech_stopped``."""

    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int
    item_id: str


class InputAudioBufferTimeoutTriggered(ServerEventBase):
    """``input_audio_buffer.timeout_triggered``: the idle timeout of server VAD fired."""

    type: Literal["input_audio_buffer.timeout_triggered"] = "input_audio_buffer.timeout_triggered"
    audio_start_ms: int
    audio_end_ms: int
    item_id: str


class InputAudioBufferDtmfEventReceived(ServerEventBase):
    """``input_audio_buffer.dtmf_event_received``: a keypad tone on a SIP call."""

    type: Literal["input_audio_buffer.dtmf_event_received"] = "input_audio_buffer.dtmf_event_received"
    event: str
    received_at: int


class OutputAudioBufferStarted(ServerEventBase):
    """``output_audio_buffer.started``: the server began playing a response (WebRTC/SIP)."""

    type: Literal["output_audio_buffer.started"] = "output_audio_buffer.started"
    response_id: str


class OutputAudioBufferStopped(ServerEventBase):
    """``output_audio_buffer.stopped``: the server finished playing a response (WebRTC/SIP)."""

    type: Literal["output_audio_buffer.stopped"] = "output_audio_buffer.stopped"
    response_id: str


class OutputAudioBufferCleared(ServerEventBase):
    """``output_audio_buffer.cleared``: buffered output dropped (barge-in or client clear)."""

    type: Literal["output_audio_buffer.cleared"] = "output_audio_buffer.cleared"
    response_id: str


class RateLimitsUpdated(ServerEventBase):
    """``rate_limits.updated``: sent at the start of each response."""

    type: Literal["rate_limits.updated"] = "rate_limits.updated"
    rate_limits: list[RateLimit]
