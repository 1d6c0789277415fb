"""The official ``openai`` package as the oracle for Live events (``openai.types.live``).

A server event must validate against the union its connection receives — ``ServerEvent`` on a
primary connection, ``ConnectServerEvent`` on a sideband — with a real discriminator on
``type``, and carry no key the official models do not declare. A nested ``response.event``
must also validate as a Responses stream event. Client events validate against
``ClientEvent`` (or ``ConnectClientEvent`` / ``ForkClientEvent``).
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.live import ClientEvent, ConnectClientEvent, ConnectServerEvent, ForkClientEvent, ServerEvent
from openai.types.responses import ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

from tests.support.sdk_models import discriminated, type_names, validated

__all__ = ["LIVE_CLIENT_TYPES", "LIVE_PRIMARY_SERVER_TYPES", "LIVE_SERVER_TYPES", "LiveWire", "check_live_client_event",
           "check_live_server_event"]


_ADAPTERS = {
    "primary": discriminated(ServerEvent),
    "sideband": discriminated(ConnectServerEvent),
}
_CLIENT_ADAPTERS = {
    "primary": discriminated(ClientEvent),
    "sideband": discriminated(ConnectClientEvent),
    "fork": discriminated(ForkClientEvent),
}
_RESPONSES = TypeAdapter(ResponseStreamEvent)


def _check(adapter: TypeAdapter[Any], event: str | bytes | dict[str, Any], side: str) -> BaseModel:
    raw, model = validated(adapter, event, f"{side} Live")
    if raw.get("type") == "response.event":
        _check_nested(raw["event"])
    return model


def _check_nested(nested: dict[str, Any]) -> None:
    validated(_RESPONSES, nested, "nested Responses")


def check_live_server_event(event: str | bytes | dict[str, Any], audience: str = "primary") -> BaseModel:
    """Validate one Live server event as received by a ``primary`` connection or a ``sideband``."""
    return _check(_ADAPTERS[audience], event, f"{audience} server")


def check_live_client_event(event: str | bytes | dict[str, Any], sender: str = "primary") -> BaseModel:
    """Validate one Live client event sent by a ``primary`` connection, a ``sideband`` or a ``fork``."""
    return _check(_CLIENT_ADAPTERS[sender], event, f"{sender} client")


LIVE_SERVER_TYPES = type_names(ConnectServerEvent)
"""Every server event type a Live connection can receive (a sideband's union is the widest)."""
LIVE_PRIMARY_SERVER_TYPES = type_names(ServerEvent)
"""The 28 server event types of a primary connection (a sideband adds ``session.paused`` / ``resumed``)."""
LIVE_CLIENT_TYPES = type_names(ClientEvent)
"""The 15 client event types of a primary connection."""


class LiveWire:
    """Every text frame on the server's Live sockets (its ``on_wire``), validated by direction when
    :meth:`verify` runs."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, str]] = []

    def __call__(self, direction: str, text: str) -> None:
        self.frames.append((direction, text))

    def verify(self) -> list[str]:
        """Check every frame; return the types the server sent."""
        sent: list[str] = []
        for direction, text in self.frames:
            if direction == "in":
                check_live_client_event(text)
            else:
                check_live_server_event(text)
                sent.append(json.loads(text)["type"])
        return sent
