"""SessionCore on plain lists: what reaches the application."""

from __future__ import annotations


from audio.playout import PlayoutBuffer
from realtime.protocol import RealtimeProtocol
from session.core import SessionCore
from session.events import CutAdjusted
from tests.test_protocol import frame, sent


def test_a_clamped_cut_is_reported_to_the_application() -> None:
    p = RealtimeProtocol()
    core = SessionCore(p, PlayoutBuffer())
    event_id = p.truncate("item_x", 900)
    sent(p)
    p.receive(frame({"type": "error", "error": {"type": "invalid_request_error", "code": "invalid_value",
                                                "message": "Audio content of 850ms is already shorter than 900ms",
                                                "param": "audio_end_ms", "event_id": event_id}}))
    for out in p.events():
        core.handle(out, 0.0)
    assert CutAdjusted("item_x", 900, 850) in core.events()
