"""The drivers' ears on an event loop: user audio an engine waits to hear, recognised off the loop.

Like :mod:`voxline.realtime.server.net.voicer` for speech. Recognition takes the better part of
a second of CPU, so it runs in a worker thread while the session goes on: audio keeps arriving,
VAD keeps deciding, and a barge-in cancels the assistant at once. What was heard goes back to
the engine at the clock's ``now()``; the events that causes go to ``deliver``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from voxline.base.clock import Clock
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.errors import ErrorSpec
from voxline.realtime.server.hearing.ears import Ears

__all__ = ["Erring", "HearingSupplier", "failed"]

_log = logging.getLogger("voxline.server")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class HearingSupplier:
    """Call :meth:`check` after every ``receive`` / ``poll``; :meth:`run` is a job of the session."""

    def __init__(self, engine: Engine, ears: Ears | None, clock: Clock,
                 deliver: Callable[[list[dict[str, Any]]], None]) -> None:
        self._engine = engine
        self._ears = ears
        self._clock = clock
        self._deliver = deliver
        self._wanted = asyncio.Event()

    def check(self) -> None:
        """Wake :meth:`run` if the engine has user audio to recognise. Asked after every client frame (an append
        every 20 to 100 ms a session), which almost never brings a job: a wake-up each time cost the server more than
        the question."""
        if self._ears is not None and self._engine.hearing_waits():
            self._wanted.set()

    async def run(self) -> None:
        if self._ears is None:
            return
        ears = self._ears
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            for job in self._engine.take_hearing():
                text: str | None
                try:
                    text = await asyncio.to_thread(ears.hear, job.audio, job.format, job.phrases)
                except Exception:  # a recogniser's failure is the item's .failed event, never the session's end
                    _log.exception("recognition failed on %s", job.item_id)
                    text = None
                try:
                    events = self._engine.provide_hearing(job.item_id, text, self._clock.now())
                except Exception:  # as on a client frame: said, and the session goes on
                    events = failed(self._engine, f"on the words heard in {job.item_id}")
                self._deliver(events)


class Erring(Protocol[T_co]):
    """An engine's way of making an error event: Realtime's (a dict) and GPT-Live's (routed)."""

    def error(self, spec: ErrorSpec, client_event_id: str | None = None) -> T_co: ...


def failed(engine: Erring[T], where: str) -> list[T]:
    """What a session sends when the engine raised (a bug of ours): one ``server_error``, as the service says it; the
    traceback goes to the log. Call it in the ``except`` block."""
    _log.exception("the engine failed %s", where)
    return [engine.error(errors.server_error())]
