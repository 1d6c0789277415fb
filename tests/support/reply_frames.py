"""A streamed reply as server frames, for tests that feed sessions through memory transports."""

from __future__ import annotations

import base64
import json

import numpy as np


def reply_frames(n: int, deltas: int, samples: int, value: int = 0) -> list[str]:
    """Session ``n``'s ``session.created``, a response and its item, then ``deltas`` audio deltas of
    ``samples`` samples each (all ``value``)."""
    item = {"id": f"item_{n}", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    response = {"id": f"resp_{n}", "object": "realtime.response", "status": "in_progress", "output": []}
    audio = base64.b64encode(np.full(samples, value, "<i2").tobytes()).decode()
    events = [
        {"type": "session.created", "session": {"id": f"sess_{n}", "type": "realtime"}},
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "response_id": f"resp_{n}", "output_index": 0, "item": item},
    ] + [
        {"type": "response.output_audio.delta", "response_id": f"resp_{n}", "item_id": f"item_{n}", "output_index": 0,
         "content_index": 0, "delta": audio}
        for _ in range(deltas)
    ]
    return [json.dumps({"event_id": f"event_{n}_{k}", **e}) for k, e in enumerate(events)]
