"""The session machines a :class:`~voxline.session.voice.VoiceSession` can drive: Realtime's or GPT-Live's.

The one seam between the driver and the interface (``settings.api``): both machines take the
same steps and return the same :class:`~voxline.session.machine.effects.Effects`.
"""

from __future__ import annotations

from typing import Any

from voxline.audio.playout import PlayoutBuffer

from .capture import CapturePath
from .live.machine import LiveMachine
from .local_barge import BargePolicy
from .machine import SessionMachine
from .mirror import ConversationMirror
from .settings import SessionSettings

__all__ = ["Machine", "driven_settings", "make_machine"]

Machine = SessionMachine | LiveMachine


def driven_settings(settings: SessionSettings) -> SessionSettings:
    """The settings the driver runs with: a Live session has no hand-over (nothing resumes on a new connection)."""
    if settings.api == "live" and settings.handover_s:
        return settings.model_copy(update={"handover_s": 0.0})
    return settings


def make_machine(settings: SessionSettings, playout: PlayoutBuffer, *, registry: Any, mirror: ConversationMirror | None,
                 capture: CapturePath | None, barge_policy: BargePolicy | None, raw_events: bool,
                 run_tools: bool) -> Machine:
    if settings.api == "live":
        return LiveMachine(settings, playout, registry=registry, capture=capture, raw_events=raw_events,
                           run_tools=run_tools)
    return SessionMachine(settings, playout, registry=registry, mirror=mirror, capture=capture,
                          barge_policy=barge_policy, raw_events=raw_events, run_tools=run_tools)
