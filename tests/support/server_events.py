"""Server events as the client sees them: each checked against the official SDK, then parsed."""

from __future__ import annotations

import base64
import json
from typing import Any

from voxline.realtime.events import parse_server_event
from tests.support.oracle import check_server_event

__all__ = ["audio_b64", "wire"]


def wire(event_type: str, **fields: Any) -> Any:
    """A typed server event of ``event_type``, valid per the SDK."""
    data = {"type": event_type, "event_id": "event_1", **fields}
    check_server_event(data)
    return parse_server_event(json.dumps(data))


def audio_b64(ms: int) -> str:
    return base64.b64encode(bytes(48 * ms)).decode()
