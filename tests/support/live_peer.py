"""A scripted GPT-Live peer for driver tests: the server end of an in-memory socket, on a virtual clock.

It answers ``session.start`` with ``session.started``, then streams its output track in real
time on the test's clock, as the service does: a 100 ms audio delta every 100 ms, silent
unless :meth:`LivePeer.reply` gave it words to say, with their transcript deltas on the
session timeline (sample ``k`` of the track at ``k / 24`` ms). It records every frame the client sent. It knows the protocol only as the ``openai`` package's
types do; every frame it sends passes the oracle.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np

from voxline.base.clock import VirtualClock
from voxline.realtime.transports.base import MemoryTransport, memory_pair

from tests.support.live_oracle import check_live_client_event, check_live_server_event

__all__ = ["LivePeer"]

RATE = 24_000


class LivePeer:
    def __init__(self, clock: VirtualClock, session_id: str = "sess_live1", refuse_start: str | None = None) -> None:
        self.clock = clock
        self.refuse_start = refuse_start  # an error's message for session.start, instead of session.started
        self.client, self.server = memory_pair(max_queue=10_000)
        self.session_id = session_id
        self.sent: list[dict[str, Any]] = []
        self.started_at: float | None = None
        self.appended_samples = 0
        self.reply_starts: list[int] = []  # start_ms of each utterance on the session timeline
        self._n = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._speech: tuple[np.ndarray, list[tuple[int, int, str]], int] | None = None
        self.position = 0  # samples of output track sent

    def transport(self) -> MemoryTransport:
        return self.client

    async def emit(self, **event: Any) -> None:
        if event["type"] != "session.output_audio.delta" and "event_id" not in event:
            self._n += 1
            event["event_id"] = f"evt_{self._n}"
        check_live_server_event(event)
        await self.server.send(json.dumps(event))

    def timeline_ms(self) -> int:
        assert self.started_at is not None
        return int((self.clock.now() - self.started_at) * 1000)

    async def serve(self) -> None:
        """Read the client's frames until the socket closes."""
        try:
            while True:
                text = await self.server.recv()
                event = json.loads(text)
                check_live_client_event(event)
                self.sent.append(event)
                if event["type"] == "session.start" and self.refuse_start is not None:
                    await self.emit(type="error", error={"type": "invalid_request_error", "code": "invalid_value",
                                                         "message": self.refuse_start,
                                                         "client_event_id": event.get("event_id")})
                elif event["type"] == "session.start":
                    self.started_at = self.clock.now()
                    session = {"id": self.session_id, "model": event["session"]["model"], "status": "active",
                               "expires_at": 2_000_000_000}
                    await self.emit(type="session.started", session=session)
                    self._tasks.append(asyncio.ensure_future(self._track()))
                elif event["type"] == "session.input_audio.append":
                    self.appended_samples += len(base64.b64decode(event["audio"])) // 2
        except Exception:
            for task in self._tasks:
                task.cancel()
            return

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _track(self) -> None:
        """The output track, silence included: one 100 ms frame per 100 ms of the clock, from the session's start."""
        position = 0
        while True:
            frame = np.zeros(2400, "<i2")
            if self._speech is not None:
                tone, words, start = self._speech
                a = position - start
                part = tone[max(0, a):a + 2400]
                frame[: len(part)] = part
                while words and words[0][0] < position + 2400:
                    w_start, w_end, text = words.pop(0)
                    await self.emit(type="session.output_transcript.delta", delta=text,
                                    start_ms=w_start * 1000 // RATE, end_ms=w_end * 1000 // RATE)
                if a + 2400 >= len(tone):
                    self._speech = None
            await self.emit(type="session.output_audio.delta", delta=base64.b64encode(frame.tobytes()).decode())
            position += 2400
            self.position = position
            await self.clock.sleep(0.1)

    def reply(self, words: list[str], seconds: float) -> int:
        """Say ``words`` over ``seconds`` from the next frame on; returns the ``start_ms`` on the session timeline."""
        start = self.position
        n = int(seconds * RATE)
        tone = (3000 * np.sin(np.arange(n) * 2 * np.pi * 220 / RATE)).astype("<i2")
        tone[tone == 0] = 1
        per = n // len(words)
        placed = [(start + i * per, start + (i + 1) * per, (" " if i else "") + w) for i, w in enumerate(words)]
        self._speech = (tone, placed, start)
        self.reply_starts.append(start * 1000 // RATE)
        return start * 1000 // RATE
