"""The local server's engine behind the client's transport interface, in the same process.

:class:`EngineTransport` is a :class:`~voxline.realtime.transports.base.Transport` whose
peer is an :class:`~voxline.realtime.server.engine.core.Engine`: a client frame is handed to
:meth:`Engine.receive` at once, and the events the engine schedules are delivered when
the given clock reaches them (:meth:`Engine.next_due` / :meth:`Engine.poll`). Frames
cross as JSON text, exactly as on a socket, so wire observers and the oracle see the
same events. Replies the engine has no voice for yet are synthesized on a worker
thread (:func:`~voxline.realtime.server.engine.voices.supply_speech`), never on the event
loop. The engine raising (a bug of ours) on a frame, a step, a reply's speech or words heard is one
``server_error`` event, and the session goes on, as served. On a :class:`~voxline.base.clock.VirtualClock` this is the engine of
``voxline replay --fast``; nothing here reads any other time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from voxline.base.clock import Clock
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.wire_json import encode_event
from voxline.realtime.server.engine.voices import supply_speech
from voxline.realtime.server.hearing.ears import Ears
from voxline.realtime.server.net.hearer import failed
from voxline.realtime.server.net.timing import first_of

__all__ = ["EngineTransport"]

_log = logging.getLogger("voxline.server")


class EngineTransport:
    """One client connection to an in-process engine (see the module docstring)."""

    media = None  # events only: audio travels inside them

    def __init__(self, engine: Engine, clock: Clock, synth: Synth, ears: Ears | None = None) -> None:
        self._engine = engine
        self._ears = ears
        self._clock = clock
        self._synth = synth
        self._inbox: deque[str] = deque()
        self._wake = asyncio.Event()
        self.close_code: int | None = None
        self.close_reason = ""
        self._expires = clock.now() + engine.max_session_s  # then session_expired and close 1001, as served
        self.server_time = clock.wall()  # the engine's wall clock, on which it dates expires_at
        self._expired = False
        self._failed_at: float | None = None  # the step the engine failed on: not tried again while it is the one due
        self._unvoiced: list[str] = []  # the texts waited for when the engine failed on their speech: not voiced again
        self._deliver(engine.open())

    def __repr__(self) -> str:
        state = "open" if self.close_code is None else f"closed {self.close_code}"
        return f"<EngineTransport {self._engine.session_id} {state}>"

    def _deliver(self, events: list[dict[str, Any]]) -> None:
        self._inbox.extend(encode_event(event) for event in events)
        if events:
            self._wake.set()

    async def _voice(self) -> None:
        """Synthesize what the engine waits for, off the loop, at the instant it asked."""
        needed = self._engine.speech_needed()
        if needed and needed != self._unvoiced:
            try:
                await asyncio.to_thread(supply_speech, self._engine, self._synth, self._clock.now())
            except Exception:  # as served: said, and the session goes on
                self._deliver(failed(self._engine, "on a reply's speech"))
                self._unvoiced = needed
            self._wake.set()
        if self._ears is not None:  # heard at the instant it was committed: no virtual time passes
            for job in self._engine.take_hearing():
                now = self._clock.now()
                text: str | None
                try:
                    text = await asyncio.to_thread(self._ears.hear, job.audio, job.format, job.phrases)
                except Exception:  # the item's .failed event, never the session's end
                    _log.exception("recognition failed on %s", job.item_id)
                    text = None
                try:
                    self._deliver(self._engine.provide_hearing(job.item_id, text, now))
                except Exception:  # as served: said, and the session goes on
                    self._deliver(failed(self._engine, f"on the words heard in {job.item_id}"))
                await self._voice()

    async def send(self, text: str) -> None:
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, self.close_reason)
        try:
            self._deliver(self._engine.receive(text, self._clock.now()))
        except Exception:  # a bug of ours must not end the client's session: say so, as the served engine does
            self._deliver(failed(self._engine, "on a client frame"))
        await self._voice()

    async def recv(self) -> str:
        while not self._inbox:
            if self.close_code is not None:
                raise ConnectionClosed(self.close_code, self.close_reason)
            if not self._expired and self._clock.now() >= self._expires:
                self._deliver(self._engine.expire())
                self._expired = True
                continue
            due = self._engine.next_due()
            due = self._expires if due is None or due == self._failed_at else min(due, self._expires)
            if due <= self._clock.now():
                try:
                    self._deliver(self._engine.poll(self._clock.now()))
                except Exception:  # as served: said, and the session goes on
                    self._deliver(failed(self._engine, "on a scheduled step"))
                    self._failed_at = due
                await self._voice()
                continue
            self._wake.clear()
            await first_of(self._clock.sleep_until(due), self._wake.wait())
        text = self._inbox.popleft()
        if self._expired and not self._inbox:
            self.close_code, self.close_reason = 1001, "session expired"
        return text

    async def ping(self) -> None:
        """The engine runs in this process: it answers at once while the connection is open."""
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, self.close_reason)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
            self._inbox.clear()
            self._wake.set()
