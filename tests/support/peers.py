"""A fake peer for session tests: the client end of an in-memory socket that answers every ping.

Its ``server`` end is the test's to write to or close; ``sent`` holds the frames the session
sent (decoded) and ``pings`` how many pings it answered.
"""

from __future__ import annotations

import json

from voxline.realtime.transports.base import memory_pair

__all__ = ["AnsweringPeer"]


class AnsweringPeer:
    """A transport whose socket answers every ping at once, whatever its server does."""

    def __init__(self) -> None:
        self.client, self.server = memory_pair()
        self.media = None
        self.sent: list[dict[str, object]] = []
        self.pings = 0

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))
        await self.client.send(text)

    async def recv(self) -> str:
        return await self.client.recv()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.client.close(code, reason)

    async def ping(self) -> None:
        self.pings += 1
