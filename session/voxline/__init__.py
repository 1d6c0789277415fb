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
            "AssistantAudioStarted", "BargeIn", "BargePolicy", "ClockedOutput", "ConnectionLost",
            "ConnectionRestored", "CutAdjusted", "DeviceLost", "DeviceReturned", "FalseBargeIn",
            "HeardTranscript", "LiveContinuity", "LiveDelegationRequested", "LiveDelivered", "LiveSessionEnded",
            "MetricsReport", "SettingsError",
            "PlaybackHeld", "RawServerEvent", "ResponseFinished", "ResponseStarted", "SessionError",
            "SessionEvent", "SessionSettings", "SpeechStarted", "SpeechStopped", "StateChanged",
            "ToolFinished", "ToolRegistry", "ToolStarted", "TranscriptDelta", "TranscriptDone",
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

__all__ = ["__version__", *sorted(_API)]

if TYPE_CHECKING:
    from voxline.audio.devices import MicSource, SpeakerSink
    from voxline.audio.recording import Recording
    from voxline.base.clock import RealClock, VirtualClock
    from voxline.base.errors import VoxlineError
    from voxline.realtime.errors import ConfigurationError
    from voxline.realtime.server import ServerConfig, serve
    from voxline.session import (
        AssistantAudioStarted, BargeIn, BargePolicy, ClockedOutput, ConnectionLost, ConnectionRestored,
        CutAdjusted, DeviceLost, DeviceReturned, FalseBargeIn, HeardTranscript, LiveContinuity,
        LiveDelegationRequested, LiveDelivered, LiveSessionEnded, MetricsReport, PlaybackHeld, SettingsError,
        RawServerEvent,
        ResponseFinished, ResponseStarted, SessionError, SessionEvent, SessionSettings,
        SpeechStarted, SpeechStopped, StateChanged, ToolFinished, ToolRegistry, ToolStarted,
        TranscriptDelta, TranscriptDone, TurnMetrics, VoiceSession,
    )


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'voxline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
