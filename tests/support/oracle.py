"""The official ``openai`` package as the oracle for every wire event.

Every event a test sees on the wire, in either direction, must validate against
``openai.types.realtime.RealtimeClientEvent`` / ``RealtimeServerEvent`` with a
real discriminator on ``type``, and carry no key the official models do not know.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent
from pydantic import BaseModel, TypeAdapter

from tests.support.sdk_models import discriminated, type_names, validated

__all__ = ["CLIENT_TYPES", "SERVER_TYPES", "WireRecorder", "check_client_event", "check_server_event", "sent"]


_CLIENT = discriminated(RealtimeClientEvent)
_SERVER = discriminated(RealtimeServerEvent)
CLIENT_TYPES = type_names(RealtimeClientEvent)
SERVER_TYPES = type_names(RealtimeServerEvent)


#: Keys the service sends that the SDK's session model does not declare (docs/protocol.md §13:
#: ``session.created`` / ``session.updated`` carry the session's ``id``, ``object`` and ``expires_at``).
SERVICE_ONLY_KEYS = {
    "session.created": {"session.id", "session.object", "session.expires_at"},
    "session.updated": {"session.id", "session.object", "session.expires_at"},
}


def _check(adapter: TypeAdapter[Any], event: str | bytes | dict[str, Any], side: str) -> BaseModel:
    raw = json.loads(event) if isinstance(event, (str, bytes)) else event
    type_ = raw.get("type") if isinstance(raw, dict) else None
    return validated(adapter, raw, side, SERVICE_ONLY_KEYS.get(type_, ()))[1]


def check_client_event(event: str | bytes | dict[str, Any]) -> BaseModel:
    """Validate one client event (JSON text or dict); raise AssertionError if invalid."""
    return _check(_CLIENT, event, "client")


def check_server_event(event: str | bytes | dict[str, Any]) -> BaseModel:
    """Validate one server event (JSON text or dict); raise AssertionError if invalid."""
    return _check(_SERVER, event, "server")


class WireRecorder:
    """Collects wire frames by direction and validates them all against the oracle.

    ``direction`` is ``"out"`` for client → server and ``"in"`` for server → client.
    Frames a test sends on purpose to provoke errors can be marked ``expect_invalid``.
    """

    def __init__(self) -> None:
        self.frames: list[tuple[str, str]] = []
        self.invalid_ok: set[str] = set()

    def __call__(self, direction: str, text: str) -> None:
        self.frames.append((direction, text))

    def expect_invalid(self, text: str) -> None:
        self.invalid_ok.add(text)

    def types(self, direction: str) -> set[str]:
        out = set()
        for d, text in self.frames:
            if d == direction:
                try:
                    out.add(json.loads(text).get("type"))
                except (ValueError, AttributeError):
                    pass
        return out

    def verify(self) -> None:
        for direction, text in self.frames:
            if text in self.invalid_ok:
                continue
            if direction == "out":
                check_client_event(text)
            else:
                check_server_event(text)


def sent(rec: WireRecorder, kind: str) -> list[dict[str, Any]]:
    """The frames of type ``kind`` the client sent, as recorded by ``rec``."""
    return [e for d, t in rec.frames if d == "out" and (e := json.loads(t))["type"] == kind]
