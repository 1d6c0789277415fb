"""What :class:`~voxline.session.voice.VoiceSession` takes, checked before anything opens.

A wrong argument is one ``TypeError`` naming it and what it takes, raised by the constructor:
not an ``AttributeError`` from deep inside once the session is connecting (which also left
the connection open). An input the session cannot take (blocks at another rate, media for a
session attached to a call, a recording another session reads) is one ``ConfigurationError``
saying what to do instead (:func:`check_input`).
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterable
from typing import Any

from voxline.audio.local_vad import LocalVad
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.recording import Recording
from voxline.base.arguments import CLOCK_METHODS, has_methods
from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime.errors import ConfigurationError

from .local_barge import BargePolicy
from .mirror import ConversationMirror
from .settings import SessionSettings
from .tools import ToolRegistry

__all__ = ["check_input", "check_session_arguments"]


def check_session_arguments(**given: Any) -> None:
    """Raise ``TypeError`` for the first argument of ``given`` that is not what its name takes (None always is)."""
    checks: dict[str, tuple[Any, str]] = {
        "settings": (lambda v: isinstance(v, SessionSettings), "a SessionSettings"),
        "output": (lambda v: isinstance(getattr(v, "playout", None), PlayoutBuffer)
                   and has_methods(v, "now", "discard_pending"),
                   "an output (ClockedOutput, SpeakerSink, or an object with playout, now() and discard_pending())"),
        "tools": (lambda v: isinstance(v, ToolRegistry), "a ToolRegistry"),
        "clock": (lambda v: has_methods(v, *CLOCK_METHODS), "a Clock (RealClock, VirtualClock)"),
        "mirror": (lambda v: isinstance(v, ConversationMirror), "a ConversationMirror"),
        "barge_policy": (lambda v: isinstance(v, BargePolicy), "a BargePolicy"),
        "approve": (callable, "a function of the call (async or not) that returns True to run it"),
        "connector": (callable, "an async function that returns a RealtimeConnection"),
        "backoff": (_plain, "a plain (not async) function of the attempt number that returns seconds to wait"),
        "on_wire": (_plain, "a plain (not async) function of (direction, text), called for every frame"),
        "aec": (lambda v: v is False or isinstance(v, str) or has_methods(v, "process"),  # False: off, as None
                "a backend's name ('webrtc', 'speex') or an echo canceller (an object with process(mic, ref))"),
        "local_vad": (lambda v: v is False or isinstance(v, (str, LocalVad)),
                      "a backend's name ('webrtc', 'silero') or a LocalVad"),
        "watch_devices": (_devices, "the speakers and microphones to watch (SpeakerSink, MicSource), in a list"),
        "raw_events": (lambda v: isinstance(v, bool), "True or False"),
        "run_tools": (lambda v: isinstance(v, bool), "True or False"),
    }
    for name, value in given.items():
        if value is None or name not in checks:
            continue
        accepts, what = checks[name]
        if not accepts(value):
            kind = "an async function" if callable(value) and not _plain(value) else type(value).__name__
            if name == "watch_devices" and isinstance(value, Collection) and not isinstance(value, (str, bytes)):
                odd = next(d for d in value if not all(hasattr(d, n) for n in ("kind", "device", "tag")))
                kind = f"a {kind} holding {type(odd).__name__}"  # the list is right, one of its items is not
            raise TypeError(f"VoiceSession: {name} takes {what}, not {kind}")


def check_input(input: object, call_id: str | None) -> None:
    """Raise for an ``input`` (None: no input) a session with ``call_id`` cannot take."""
    if input is not None and not hasattr(input, "__aiter__"):
        raise TypeError(f"input takes an async iterable of int16 blocks or (adc_time, block) pairs (such as "
                        f"MicSource().blocks() or a Recording), not {type(input).__name__}")
    rate = getattr(input, "capture_rate", SAMPLE_RATE)  # a microphone's blocks, watched or not
    if isinstance(rate, int) and rate != SAMPLE_RATE:
        raise ConfigurationError(f"the input captures at {rate} Hz; a session takes {SAMPLE_RATE} Hz blocks: "
                                 f"open the microphone with MicSource(rate={SAMPLE_RATE}) (the default)")
    if call_id is not None and input is not None:
        raise ConfigurationError("a session attached to a call (call_id) has no media of its own: drop input")
    if isinstance(input, Recording) and input.claimed:  # a second session read nothing, and said nothing
        raise ConfigurationError("this Recording is already another session's input (a recording is read once): "
                                 "give each session a Recording of its own")


def _devices(value: Any) -> bool:
    """Devices to watch, each with the kind, device and tag a watch reads: an iterable (not a string), whose items
    are checked when it is a collection (a generator's are not made here)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return False
    return not isinstance(value, Collection) or all(
        all(hasattr(d, name) for name in ("kind", "device", "tag")) for d in value)


def _plain(value: Any) -> bool:
    """A callable that answers when called: an ``async def`` one would hand back a coroutine never run."""
    return callable(value) and not inspect.iscoroutinefunction(value) and not inspect.iscoroutinefunction(
        getattr(value, "__call__", None))
