"""A scripted GPT-Live peer for driver tests: the server end of an in-memory socket, on a virtual clock.

It answers ``session.start`` with ``session.started``, then streams one utterance per
``reply`` in real time on the test's clock (100 ms audio deltas, a transcript word per
200 ms, ``start_ms`` on the session timeline, which it starts at ``session.start``), and
records every frame the client sent. It knows the protocol only as the ``openai`` package's
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

from .live_oracle import check_live_client_event, check_live_server_event

__all__ = ["LivePeer"]

RATE = 24_000


class LivePeer:
    def __init__(self, clock: VirtualClock, session_id: str = "sess_live1") -> None:
        self.clock = clock
        self.client, self.server = memory_pair(max_queue=10_000)
        self.session_id = session_id
        self.sent: list[dict[str, Any]] = []
        self.started_at: float | None = None
        self.appended_samples = 0
        self.reply_starts: list[int] = []  # start_ms of each utterance on the session timeline
        self._n = 0
        self._tasks: list[asyncio.Task[None]] = []

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
                if event["type"] == "session.start":
                    self.started_at = self.clock.now()
                    session = {"id": self.session_id, "model": event["session"]["model"], "status": "active",
                               "expires_at": 2_000_000_000}
                    await self.emit(type="session.started", session=session)
                elif event["type"] == "session.input_audio.append":
                    self.appended_samples += len(base64.b64decode(event["audio"])) // 2
        except Exception:
            return

    async def reply(self, words: list[str], seconds: float) -> int:
        """Stream one utterance in real time; returns its ``start_ms`` on the session timeline."""
        start_ms = self.timeline_ms()
        self.reply_starts.append(start_ms)
        n = int(seconds * RATE)
        tone = (3000 * np.sin(np.arange(n) * 2 * np.pi * 220 / RATE)).astype("<i2")
        tone[tone == 0] = 1
        per_word = seconds / len(words)
        word = 0
        for i in range(0, n, 2400):
            t_ms = start_ms + i * 1000 // RATE
            while word < len(words) and start_ms + word * per_word * 1000 <= t_ms:
                await self.emit(type="session.output_transcript.delta", delta=(" " if word else "") + words[word],
                                start_ms=int(start_ms + word * per_word * 1000),
                                end_ms=int(start_ms + (word + 1) * per_word * 1000))
                word += 1
            await self.emit(type="session.output_audio.delta",
                            delta=base64.b64encode(tone[i:i + 2400].tobytes()).decode())
            await self.clock.sleep(0.1)
        return start_ms
