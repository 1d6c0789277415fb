"""Session layer: barge-in, tools, the conversation mirror, events for applications, the CLI.

The application API::

    from voxline.session import VoiceSession, SessionSettings, ToolRegistry
"""

from .events import (
    AssistantAudioStarted,
    BargeIn,
    ConnectionLost,
    ConnectionRestored,
    CutAdjusted,
    FalseBargeIn,
    PlaybackHeld,
    RawServerEvent,
    ResponseFinished,
    ResponseStarted,
    SessionError,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
    StateChanged,
    TranscriptDelta,
    TranscriptDone,
)
from .local_barge import BargePolicy
from .media import ClockedOutput
from .settings import SessionSettings
from .tools import ToolFinished, ToolRegistry, ToolStarted
from .voice import VoiceSession

__all__ = [
    "AssistantAudioStarted",
    "BargeIn",
    "BargePolicy",
    "ClockedOutput",
    "ConnectionLost",
    "ConnectionRestored",
    "CutAdjusted",
    "FalseBargeIn",
    "PlaybackHeld",
    "RawServerEvent",
    "ResponseFinished",
    "ResponseStarted",
    "SessionError",
    "SessionEvent",
    "SessionSettings",
    "SpeechStarted",
    "SpeechStopped",
    "StateChanged",
    "ToolFinished",
    "ToolRegistry",
    "ToolStarted",
    "TranscriptDelta",
    "TranscriptDone",
    "VoiceSession",
]
