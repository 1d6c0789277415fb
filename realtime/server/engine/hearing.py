"""What a session waits to hear: user audio items handed to the driver's recogniser.

Data only; :mod:`voxline.realtime.server.engine.listening` acts on it. The engine never
recognises speech itself: a committed user audio item with nothing scripted becomes a
:class:`HearingJob` the driver takes (:meth:`~voxline.realtime.server.engine.core.Engine.take_hearing`),
runs through its recogniser off the event loop, and answers with
:meth:`~voxline.realtime.server.engine.core.Engine.provide_hearing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from voxline.base.audio_format import AudioFormat

__all__ = ["HearingJob", "HearingState"]


@dataclass(frozen=True, slots=True)
class HearingJob:
    """One user audio item to recognise: its audio in the session's input format, and the
    phrases the scenario listens for (to steer the recogniser)."""

    item_id: str
    audio: bytes = field(repr=False)
    format: AudioFormat
    phrases: tuple[str, ...]


@dataclass
class HearingState:
    """Jobs not yet taken, items being heard, and a response waiting for their words."""

    enabled: bool = False  # the driver has a recogniser (EngineConfig.hearing)
    waiting: list[HearingJob] = field(default_factory=list)
    in_flight: set[str] = field(default_factory=set)  # item ids taken and not yet provided
    deferred: dict[str, Any] | None = None  # response.create params of a response that waits to hear

    def pending(self, item_id: str) -> bool:
        return item_id in self.in_flight or any(job.item_id == item_id for job in self.waiting)
