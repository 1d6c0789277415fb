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
from pydantic import BaseModel, TypeAdapter, ValidationError

from tests.support.oracle import _discriminated, _extras, _type_names  # one walk over the SDK's models for both APIs

__all__ = ["LIVE_CLIENT_TYPES", "LIVE_PRIMARY_SERVER_TYPES", "LIVE_SERVER_TYPES", "LiveWire", "check_live_client_event",
           "check_live_server_event"]


_ADAPTERS = {
    "primary": _discriminated(ServerEvent),
    "sideband": _discriminated(ConnectServerEvent),
}
_CLIENT_ADAPTERS = {
    "primary": _discriminated(ClientEvent),
    "sideband": _discriminated(ConnectClientEvent),
    "fork": _discriminated(ForkClientEvent),
}
_RESPONSES = TypeAdapter(ResponseStreamEvent)


def _check(adapter: TypeAdapter[Any], event: str | bytes | dict[str, Any], side: str) -> BaseModel:
    raw = json.loads(event) if isinstance(event, (str, bytes)) else event
    if not isinstance(raw, dict):
        raise AssertionError(f"{side} Live event is not a JSON object: {raw!r}"[:300])
    try:
        model = adapter.validate_python(raw)
    except ValidationError as exc:
        raise AssertionError(f"{side} Live event {raw.get('type')!r} is not valid per openai: {exc}\n{raw}") from None
    extra = _extras(model)
    if extra:
        raise AssertionError(f"{side} Live event {raw.get('type')!r} has keys openai does not know: {extra}\n{raw}")
    if raw.get("type") == "response.event":
        _check_nested(raw["event"])
    return model


def _check_nested(nested: dict[str, Any]) -> None:
    try:
        model = _RESPONSES.validate_python(nested)
    except ValidationError as exc:
        raise AssertionError(f"nested Responses event {nested.get('type')!r} is not valid per openai: {exc}") from None
    extra = _extras(model)
    if extra:
        raise AssertionError(f"nested Responses event {nested.get('type')!r} has unknown keys: {extra}")


def check_live_server_event(event: str | bytes | dict[str, Any], audience: str = "primary") -> BaseModel:
    """Validate one Live server event as received by a ``primary`` connection or a ``sideband``."""
    return _check(_ADAPTERS[audience], event, f"{audience} server")


def check_live_client_event(event: str | bytes | dict[str, Any], sender: str = "primary") -> BaseModel:
    """Validate one Live client event sent by a ``primary`` connection, a ``sideband`` or a ``fork``."""
    return _check(_CLIENT_ADAPTERS[sender], event, f"{sender} client")


LIVE_SERVER_TYPES = _type_names(ConnectServerEvent)
"""Every server event type a Live connection can receive (a sideband's union is the widest)."""
LIVE_PRIMARY_SERVER_TYPES = _type_names(ServerEvent)
"""The 28 server event types of a primary connection (a sideband adds ``session.paused`` / ``resumed``)."""
LIVE_CLIENT_TYPES = _type_names(ClientEvent)
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
