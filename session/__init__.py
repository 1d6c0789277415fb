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
    DeviceLost,
    DeviceReturned,
    FalseBargeIn,
    PlaybackHeld,
    HeardTranscript,
    LiveContinuity,
    LiveDelegationRequested,
    LiveDelivered,
    LiveSessionEnded,
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
    TurnMetrics,
)
from .app_events import AppEvent
from .local_barge import BargePolicy
from voxline.audio.clocked_output import ClockedOutput
from .metrics import MetricsReport
from .settings import SessionSettings, SettingsError
from voxline.realtime.connection import WireObserver
from .reconnect import Backoff
from .tools import Approver, ToolEvent, ToolFinished, ToolRegistry, ToolStarted
from .voice import Connector, DeviceSessionOptions, VoiceSession

__all__ = [
    "AppEvent",
    "Approver",
    "AssistantAudioStarted",
    "Backoff",
    "BargeIn",
    "BargePolicy",
    "ClockedOutput",
    "ConnectionLost",
    "Connector",
    "ConnectionRestored",
    "CutAdjusted",
    "DeviceLost",
    "DeviceSessionOptions",
    "DeviceReturned",
    "FalseBargeIn",
    "PlaybackHeld",
    "HeardTranscript",
    "LiveContinuity",
    "LiveDelegationRequested",
    "LiveDelivered",
    "LiveSessionEnded",
    "MetricsReport",
    "RawServerEvent",
    "ResponseFinished",
    "ResponseStarted",
    "SessionError",
    "SessionEvent",
    "SessionSettings",
    "SettingsError",
    "SpeechStarted",
    "SpeechStopped",
    "StateChanged",
    "ToolEvent",
    "ToolFinished",
    "ToolRegistry",
    "ToolStarted",
    "TranscriptDelta",
    "TranscriptDone",
    "TurnMetrics",
    "VoiceSession",
    "WireObserver",
]
