"""The local server's Live engine behind the client's transport interface, in the same process.

:class:`LiveEngineTransport` is to GPT-Live what
:class:`~voxline.realtime.server.net.inprocess.EngineTransport` is to Realtime: a client frame
goes to :meth:`LiveEngine.receive` at once and what the engine answers for this connection is
delivered in order, as JSON text, so wire observers and the oracle see what a socket would
carry. The Live engine's timeline runs on the caller's audio, so on a
:class:`~voxline.base.clock.VirtualClock` (``voxline replay --fast --api live``) its track
advances exactly as the recording is fed. Replies it has no voice for are synthesized on a
worker thread, never on the event loop. ``session.closed`` ends the connection (code 1000), as
the served socket does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque

from voxline.base.clock import Clock
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.voices import supply_speech
from voxline.realtime.server.live.engine import LiveEngine, Out

__all__ = ["LiveEngineTransport"]

_log = logging.getLogger("voxline.server")


class LiveEngineTransport:
    media = None  # audio travels inside events

    def __init__(self, engine: LiveEngine, clock: Clock, synth: Synth) -> None:
        self._engine = engine
        self._clock = clock
        self._synth = synth
        self._inbox: deque[str] = deque()
        self._wake = asyncio.Event()
        self.close_code: int | None = None
        self.close_reason = ""
        self.server_time = clock.wall()

    def __repr__(self) -> str:
        return f"<LiveEngineTransport {self._engine.session_id} {'open' if self.close_code is None else 'closed'}>"

    def _deliver(self, outs: list[Out]) -> None:
        for out in outs:
            if out.to in ("all", "primary", "origin"):
                self._inbox.append(json.dumps(out.event))
        if outs:
            self._wake.set()

    async def send(self, text: str) -> None:
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, self.close_reason)
        try:
            self._deliver(self._engine.receive(text, "primary"))
        except Exception:  # a bug of ours must not end the client's session: say so, as the served engine does
            _log.exception("the Live engine failed on a client frame")
            self._deliver([self._engine.error(errors.server_error())])
        if self._engine.speech_needed():
            await asyncio.to_thread(supply_speech, self._engine, self._synth, self._clock.now())

    async def recv(self) -> str:
        while not self._inbox:
            if self.close_code is not None:
                raise ConnectionClosed(self.close_code, self.close_reason)
            if self._engine.closed is not None:
                self.close_code, self.close_reason = 1000, "session closed"
                continue
            self._wake.clear()
            await self._wake.wait()
        return self._inbox.popleft()

    async def ping(self) -> None:
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, self.close_reason)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.close_code is None:
            self._deliver(self._engine.close("remote_hangup"))
            self.close_code, self.close_reason = code, reason
            self._inbox.clear()
            self._wake.set()
