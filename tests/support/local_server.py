"""The local server on loopback, configured for tests, and a raw ``websockets`` client for it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.client import ClientConnection

from voxline.realtime.server import ServerConfig
from voxline.realtime.server.net.config import wire_text
from tests.support.oracle import WireRecorder

__all__ = ["AUTH", "KEY", "Client", "config"]

KEY = "sk-local-test"
AUTH = {"Authorization": f"Bearer {KEY}"}


def config(recorder: WireRecorder | None = None, **overrides: Any) -> ServerConfig:
    """Port 0, the tone voice, instant audio; frames go to ``recorder`` in the client's directions."""

    def on_wire(direction: str, text: str) -> None:
        if recorder is not None:
            recorder("out" if direction == "in" else "in", text)

    settings: dict[str, Any] = {"port": 0, "voice": "tone", "speed": float("inf"), "api_key": KEY, "on_wire": on_wire}
    return ServerConfig(**{**settings, **overrides})


class Client:
    """A raw WebSocket client that reads server events until the one it waits for."""

    def __init__(self, ws: ClientConnection, recorder: WireRecorder) -> None:
        self.ws = ws
        self.recorder = recorder

    async def send(self, event: dict[str, Any] | str | bytes, invalid: bool = False) -> None:
        frame = json.dumps(event) if isinstance(event, dict) else event
        if invalid:
            self.recorder.expect_invalid(wire_text(frame))
        await self.ws.send(frame)

    async def until(self, type_: str, **match: Any) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while True:
                event = json.loads(await self.ws.recv())
                events.append(event)
                if event["type"] == type_ and all(event.get(k) == v for k, v in match.items()):
                    return events
