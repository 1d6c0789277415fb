"""voxline: realtime voice sessions over the OpenAI Realtime API, with exact barge-in.

The application API is here at the top::

    import voxline

    async with voxline.VoiceSession(voxline.SessionSettings(), tools=registry) as session:
        await session.send_text("What's the weather in Paris?")
        async for event in session:
            ...

The layers are subpackages: :mod:`voxline.realtime` (the wire), :mod:`voxline.audio` (the
media pipeline), :mod:`voxline.session` (the session manager and the CLI), on top of the
shared primitives in :mod:`voxline.base`. Names are loaded on first use, so
``import voxline.base`` or ``voxline serve`` pays for nothing else.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# A library's records go where the application sends them; without a handler, nowhere (not stderr).
logging.getLogger("voxline").addHandler(logging.NullHandler())

_API: dict[str, str] = {
    **dict.fromkeys(
        [
            "AppEvent", "AssistantAudioStarted", "BargeIn", "BargePolicy", "ClockedOutput", "ConnectionLost",
            "ConnectionRestored", "CutAdjusted", "DeviceLost", "DeviceReturned", "FalseBargeIn",
            "HeardTranscript", "LiveContinuity", "LiveDelegationRequested", "LiveDelivered", "LiveSessionEnded",
            "MetricsReport", "SettingsError",
            "PlaybackHeld", "RawServerEvent", "ResponseFinished", "ResponseStarted", "SessionError",
            "SessionEvent", "SessionSettings", "SpeechStarted", "SpeechStopped", "StateChanged",
            "ToolEvent", "ToolFinished", "ToolRegistry", "ToolStarted", "TranscriptDelta", "TranscriptDone",
            "TurnMetrics", "VoiceSession",
        ],
        "voxline.session",
    ),
    "ServerConfig": "voxline.realtime.server",
    "serve": "voxline.realtime.server",
    "RealClock": "voxline.base.clock",
    "VirtualClock": "voxline.base.clock",
    "VoxlineError": "voxline.base.errors",
    "ConfigurationError": "voxline.realtime.errors",
    "MicSource": "voxline.audio.devices",
    "SpeakerSink": "voxline.audio.devices",
    "Recording": "voxline.audio.recording",
}

__all__ = [
    "__version__",
    "AppEvent",
    "AssistantAudioStarted",
    "BargeIn",
    "BargePolicy",
    "ClockedOutput",
    "ConfigurationError",
    "ConnectionLost",
    "ConnectionRestored",
    "CutAdjusted",
    "DeviceLost",
    "DeviceReturned",
    "FalseBargeIn",
    "HeardTranscript",
    "LiveContinuity",
    "LiveDelegationRequested",
    "LiveDelivered",
    "LiveSessionEnded",
    "MetricsReport",
    "MicSource",
    "PlaybackHeld",
    "RawServerEvent",
    "RealClock",
    "Recording",
    "ResponseFinished",
    "ResponseStarted",
    "ServerConfig",
    "SessionError",
    "SessionEvent",
    "SessionSettings",
    "SettingsError",
    "SpeakerSink",
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
    "VirtualClock",
    "VoiceSession",
    "VoxlineError",
    "serve",
]

if TYPE_CHECKING:  # each name as itself: an explicit export that mypy --strict and Pyright take
    from voxline.audio.devices import MicSource as MicSource, SpeakerSink as SpeakerSink
    from voxline.audio.recording import Recording as Recording
    from voxline.base.clock import RealClock as RealClock, VirtualClock as VirtualClock
    from voxline.base.errors import VoxlineError as VoxlineError
    from voxline.realtime.errors import ConfigurationError as ConfigurationError
    from voxline.realtime.server import ServerConfig as ServerConfig, serve as serve
    from voxline.session import (
        AppEvent as AppEvent,
        AssistantAudioStarted as AssistantAudioStarted,
        BargeIn as BargeIn,
        BargePolicy as BargePolicy,
        ClockedOutput as ClockedOutput,
        ConnectionLost as ConnectionLost,
        ConnectionRestored as ConnectionRestored,
        CutAdjusted as CutAdjusted,
        DeviceLost as DeviceLost,
        DeviceReturned as DeviceReturned,
        FalseBargeIn as FalseBargeIn,
        HeardTranscript as HeardTranscript,
        LiveContinuity as LiveContinuity,
        LiveDelegationRequested as LiveDelegationRequested,
        LiveDelivered as LiveDelivered,
        LiveSessionEnded as LiveSessionEnded,
        MetricsReport as MetricsReport,
        PlaybackHeld as PlaybackHeld,
        RawServerEvent as RawServerEvent,
        ResponseFinished as ResponseFinished,
        ResponseStarted as ResponseStarted,
        SessionError as SessionError,
        SessionEvent as SessionEvent,
        SessionSettings as SessionSettings,
        SettingsError as SettingsError,
        SpeechStarted as SpeechStarted,
        SpeechStopped as SpeechStopped,
        StateChanged as StateChanged,
        ToolEvent as ToolEvent,
        ToolFinished as ToolFinished,
        ToolRegistry as ToolRegistry,
        ToolStarted as ToolStarted,
        TranscriptDelta as TranscriptDelta,
        TranscriptDone as TranscriptDone,
        TurnMetrics as TurnMetrics,
        VoiceSession as VoiceSession,
    )
else:
    def __getattr__(name: str) -> Any:  # at run time only: a type checker sees the names above and no others
        module = _API.get(name)
        if module is None:
            raise AttributeError(f"module 'voxline' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(__all__)
