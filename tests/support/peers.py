"""Fake peers for session tests: the client end of an in-memory socket that answers every ping, and one
whose network stalls.

A peer's ``server`` end is the test's to write to or close; ``sent`` holds the frames the session
sent (decoded) and ``pings`` how many pings it answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.transports.base import memory_pair

__all__ = ["AnsweringPeer", "StallingPeer", "greeting_connector"]


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


class StallingPeer(AnsweringPeer):
    """A peer whose network stalls once :meth:`stall` is called: the socket stays open and carries nothing, so a
    close handshake is never answered and nothing more is received, until the connection is aborted."""

    def __init__(self) -> None:
        super().__init__()
        self._stalled = False
        self._aborted = asyncio.Event()
        self.aborts = 0

    def stall(self) -> None:
        self._stalled = True

    async def recv(self) -> str:
        if not self._stalled:
            receiving = asyncio.ensure_future(self.client.recv())
            aborted = asyncio.ensure_future(self._aborted.wait())
            await asyncio.wait((receiving, aborted), return_when=asyncio.FIRST_COMPLETED)
            aborted.cancel()
            if receiving.done() and not self._stalled:
                return receiving.result()
            receiving.cancel()
        await self._aborted.wait()
        raise ConnectionClosed(1006, "aborted")

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self._stalled:
            await self._aborted.wait()  # the close frame is never answered
        else:
            await self.client.close(code, reason)

    async def ping(self) -> None:
        if self._stalled:
            await self._aborted.wait()  # never answered
            raise ConnectionClosed(1006, "aborted")
        await super().ping()

    def abort(self) -> None:
        self.aborts += 1
        self._aborted.set()


P = TypeVar("P", bound=AnsweringPeer)


def greeting_connector(peers: list[P], make: Callable[[], P], *, wrap: Callable[[P], Any] = lambda peer: peer,
                       then: Callable[[P], None] | None = None) -> Callable[[], Awaitable[RealtimeConnection]]:
    """A session's connector: each connection a new peer from ``make`` (kept in ``peers``) that says
    ``session.created`` first, then ``then(peer)`` if given; the transport is ``wrap(peer)``."""
    async def connector() -> RealtimeConnection:
        peer = make()
        peers.append(peer)
        await peer.server.send(json.dumps(ev.server_event_sample("session.created")))
        if then is not None:
            then(peer)
        return RealtimeConnection(wrap(peer))

    return connector
