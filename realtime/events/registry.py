"""The server event vocabulary as a whole: the GA union, its type names, and ``ServerEvent``."""

from __future__ import annotations

import typing
from typing import Annotated, Union

from pydantic import Field

from .fallback import BetaServerEvent, UnknownServerEvent
from .server import (
    ConversationCreated,
    ConversationItemAdded,
    ConversationItemCreated,
    ConversationItemDeleted,
    ConversationItemDone,
    ConversationItemInputAudioTranscriptionCompleted,
    ConversationItemInputAudioTranscriptionDelta,
    ConversationItemInputAudioTranscriptionFailed,
    ConversationItemInputAudioTranscriptionSegment,
    ConversationItemRetrieved,
    ConversationItemTruncated,
    ErrorEvent,
    InputAudioBufferCleared,
    InputAudioBufferCommitted,
    InputAudioBufferDtmfEventReceived,
    InputAudioBufferSpeechStarted,
    InputAudioBufferSpeechStopped,
    InputAudioBufferTimeoutTriggered,
    OutputAudioBufferCleared,
    OutputAudioBufferStarted,
    OutputAudioBufferStopped,
    RateLimitsUpdated,
    ServerEventBase,
    SessionCreated,
    SessionUpdated,
)
from .server_mcp import (
    McpListToolsCompleted,
    McpListToolsFailed,
    McpListToolsInProgress,
    ResponseMcpCallArgumentsDelta,
    ResponseMcpCallArgumentsDone,
    ResponseMcpCallCompleted,
    ResponseMcpCallFailed,
    ResponseMcpCallInProgress,
)
from .server_response import (
    ResponseContentPartAdded,
    ResponseContentPartDone,
    ResponseCreated,
    ResponseDone,
    ResponseFunctionCallArgumentsDelta,
    ResponseFunctionCallArgumentsDone,
    ResponseOutputAudioDelta,
    ResponseOutputAudioDone,
    ResponseOutputAudioTranscriptDelta,
    ResponseOutputAudioTranscriptDone,
    ResponseOutputItemAdded,
    ResponseOutputItemDone,
    ResponseOutputTextDelta,
    ResponseOutputTextDone,
)

__all__ = [
    "KnownServerEvent",
    "SERVER_EVENT_CLASSES",
    "SERVER_EVENT_TYPES",
    "ServerEvent",
]

_KnownUnion = Union[
    ErrorEvent,
    SessionCreated,
    SessionUpdated,
    ConversationCreated,
    ConversationItemAdded,
    ConversationItemDone,
    ConversationItemCreated,
    ConversationItemRetrieved,
    ConversationItemTruncated,
    ConversationItemDeleted,
    ConversationItemInputAudioTranscriptionDelta,
    ConversationItemInputAudioTranscriptionCompleted,
    ConversationItemInputAudioTranscriptionFailed,
    ConversationItemInputAudioTranscriptionSegment,
    InputAudioBufferCommitted,
    InputAudioBufferCleared,
    InputAudioBufferSpeechStarted,
    InputAudioBufferSpeechStopped,
    InputAudioBufferTimeoutTriggered,
    InputAudioBufferDtmfEventReceived,
    OutputAudioBufferStarted,
    OutputAudioBufferStopped,
    OutputAudioBufferCleared,
    RateLimitsUpdated,
    ResponseCreated,
    ResponseDone,
    ResponseOutputItemAdded,
    ResponseOutputItemDone,
    ResponseContentPartAdded,
    ResponseContentPartDone,
    ResponseOutputAudioDelta,
    ResponseOutputAudioDone,
    ResponseOutputAudioTranscriptDelta,
    ResponseOutputAudioTranscriptDone,
    ResponseOutputTextDelta,
    ResponseOutputTextDone,
    ResponseFunctionCallArgumentsDelta,
    ResponseFunctionCallArgumentsDone,
    McpListToolsInProgress,
    McpListToolsCompleted,
    McpListToolsFailed,
    ResponseMcpCallArgumentsDelta,
    ResponseMcpCallArgumentsDone,
    ResponseMcpCallInProgress,
    ResponseMcpCallCompleted,
    ResponseMcpCallFailed,
]

KnownServerEvent = Annotated[_KnownUnion, Field(discriminator="type")]
"""Every GA server event type the official SDK types, discriminated on ``type``."""

ServerEvent = Union[_KnownUnion, UnknownServerEvent, BetaServerEvent]
"""What :func:`~voxline.realtime.events.parse_server_event` returns."""

SERVER_EVENT_CLASSES: dict[str, type[ServerEventBase]] = {
    cls.model_fields["type"].default: cls for cls in typing.get_args(_KnownUnion)
}
SERVER_EVENT_TYPES: frozenset[str] = frozenset(SERVER_EVENT_CLASSES)
