"""Frames into the sans-I/O protocol core and the frames it writes, as plain data."""

from __future__ import annotations

import json
from typing import Any

from voxline.realtime.protocol import RealtimeProtocol
from tests.support.oracle import check_client_event

__all__ = ["frame", "response", "sent"]

_n = 0


def frame(payload: dict[str, Any]) -> str:
    """``payload`` as a server frame, given a fresh ``event_id`` unless it has one."""
    global _n
    _n += 1
    payload.setdefault("event_id", f"event_{_n}")
    return json.dumps(payload)


def response(rid: str, status: str = "in_progress", **extra: Any) -> dict[str, Any]:
    return {"id": rid, "object": "realtime.response", "status": status, "output": [], "conversation_id": "conv_1", **extra}


def sent(p: RealtimeProtocol) -> list[dict[str, Any]]:
    """What the core has to send, each frame checked against the official SDK."""
    frames = p.data_to_send()
    for f in frames:
        check_client_event(f)  # every frame the core writes is valid per the official SDK
    return [json.loads(f) for f in frames]
