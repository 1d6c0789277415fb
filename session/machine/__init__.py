"""The session machine: a voice session's decisions as a sans-I/O object (:mod:`.machine`).

``VoiceSession`` drives it; tests drive it with plain lists of protocol outputs.
"""

from __future__ import annotations

from .effects import NO_EFFECTS, Effects
from .machine import SessionMachine
from .microphone import Captured, MicrophonePath

__all__ = ["NO_EFFECTS", "Captured", "Effects", "MicrophonePath", "SessionMachine"]
