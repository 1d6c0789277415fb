"""The sans-I/O protocol core, driven with plain lists of frames."""

from __future__ import annotations

import base64

import pytest

from voxline.realtime import events as ev
from voxline.realtime.errors import LocalProtocolError
from voxline.realtime.lifecycle import ResponseStatus, Slot
from voxline.realtime.notices import (
    BetaProtocolDetected,
    CommandFailed,
    MalformedServerEvent,
    ResponseStatusChanged,
    TruncateAdjusted,
)
from voxline.realtime.protocol import RealtimeProtocol
from tests.support.protocol_frames import frame, response, sent


def audio_delta(rid: str, item: str, ms: int) -> str:
    pcm = b"\x01\x00" * (24 * ms)
    return frame(
        {
            "type": "response.output_audio.delta",
            "response_id": rid,
            "item_id": item,
            "output_index": 0,
            "content_index": 0,
            "delta": base64.b64encode(pcm).decode(),
        }
    )


def assistant_item(item_id: str, prev: str | None) -> str:
    item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    return frame({"type": "conversation.item.added", "item": item, "previous_item_id": prev})


def started(p: RealtimeProtocol, rid: str = "resp_1") -> None:
    p.create_response()
    sent(p)
    p.receive(frame({"type": "response.created", "response": response(rid)}))


def test_every_client_event_gets_a_unique_event_id() -> None:
    p = RealtimeProtocol()
    p.update_session({"type": "realtime", "instructions": "hi"})
    p.append_audio(b"\x00\x00" * 480)
    p.commit_audio()
    p.create_item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]})
    p.create_response()
    out = sent(p)
    ids = [e["event_id"] for e in out]
    assert len(set(ids)) == len(ids) == 5


def test_session_update_requires_type() -> None:
    with pytest.raises(LocalProtocolError, match="session.type"):
        RealtimeProtocol().update_session({"instructions": "x"})


def test_late_deltas_of_a_cancelled_response_are_dropped() -> None:
    p = RealtimeProtocol()
    started(p)
    p.receive(assistant_item("item_a", None))
    p.receive(audio_delta("resp_1", "item_a", 100))
    assert p.cancel_response()
    assert [e["type"] for e in sent(p)] == ["response.cancel"]
    p.receive(audio_delta("resp_1", "item_a", 100))
    p.receive(frame({"type": "response.output_audio_transcript.delta", "response_id": "resp_1", "item_id": "item_a",
                     "output_index": 0, "content_index": 0, "delta": "late"}))
    p.receive(frame({"type": "response.done", "response": response("resp_1", "cancelled",
                     status_details={"type": "cancelled", "reason": "client_cancelled"})}))
    out = p.events()
    deltas = [e for e in out if isinstance(e, ev.ResponseOutputAudioDelta)]
    assert len(deltas) == 1
    assert not any(isinstance(e, ev.ResponseOutputAudioTranscriptDelta) for e in out)
    assert ResponseStatusChanged("resp_1", ResponseStatus.CANCELLED, "client_cancelled") in out
    assert p.received_audio_ms("item_a") == 100
    assert p.slot is Slot.IDLE


def test_send_of_a_cancel_returns_the_event_id_on_the_wire_or_none() -> None:
    p = RealtimeProtocol()
    assert p.send({"type": "response.cancel"}) is None  # nothing active: nothing sent
    assert sent(p) == []
    started(p)
    event_id = p.send({"type": "response.cancel"})
    (cancel,) = sent(p)
    assert cancel["type"] == "response.cancel" and event_id == cancel["event_id"]


def test_server_errors_map_back_to_the_command() -> None:
    p = RealtimeProtocol()
    event_id = p.delete_item("nope")
    sent(p)
    p.receive(frame({"type": "error", "error": {"type": "invalid_request_error", "code": "item_delete_invalid_item_id",
                                                "message": "no such item", "param": None, "event_id": event_id}}))
    failure = next(e for e in p.events() if isinstance(e, CommandFailed))
    assert failure.command_type == "conversation.item.delete"
    assert failure.event_id == event_id and failure.handled is False


def test_truncate_is_clamped_to_received_audio() -> None:
    p = RealtimeProtocol()
    started(p)
    p.receive(assistant_item("item_a", None))
    p.receive(audio_delta("resp_1", "item_a", 240))
    p.truncate("item_a", 900)
    (t,) = sent(p)
    assert t["audio_end_ms"] == 240


def test_already_shorter_error_is_recovered_by_cutting_at_n() -> None:
    p = RealtimeProtocol()
    event_id = p.truncate("item_x", 2535)
    sent(p)
    p.receive(frame({"type": "error", "error": {"type": "invalid_request_error", "code": "invalid_value",
                                                "message": "Audio content of 2450ms is already shorter than 2535ms",
                                                "param": "audio_end_ms", "event_id": event_id}}))
    (retry,) = sent(p)
    assert retry["type"] == "conversation.item.truncate" and retry["audio_end_ms"] == 2450
    out = p.events()
    assert TruncateAdjusted("item_x", 2535, 2450) in out
    assert next(e for e in out if isinstance(e, CommandFailed)).handled


def test_user_items_cannot_be_truncated() -> None:
    p = RealtimeProtocol()
    item = {"id": "item_u", "object": "realtime.item", "type": "message", "role": "user", "content": []}
    p.receive(frame({"type": "conversation.item.added", "item": item, "previous_item_id": None}))
    with pytest.raises(LocalProtocolError, match="cannot be truncated"):
        p.truncate("item_u", 10)


def test_item_order_follows_previous_item_id_and_deletes() -> None:
    p = RealtimeProtocol()
    p.receive(assistant_item("a", None))
    p.receive(assistant_item("c", "a"))
    p.receive(assistant_item("b", "a"))
    p.receive(assistant_item("z", "root"))
    assert p.items == ["z", "a", "b", "c"]
    p.receive(frame({"type": "conversation.item.deleted", "item_id": "b"}))
    assert p.items == ["z", "a", "c"]


def test_malformed_and_unknown_frames_never_break_the_core() -> None:
    p = RealtimeProtocol()
    p.receive("{not json")
    p.receive("[1, 2]")
    p.receive(frame({"type": "response.output_audio.delta", "response_id": "r", "item_id": "i", "output_index": "x",
                     "content_index": 0, "delta": ""}))
    p.receive(frame({"type": "brand.new.event", "payload": 1}))
    p.receive(frame({"type": "response.audio.delta", "response_id": "r", "item_id": "i", "output_index": 0,
                     "content_index": 0, "delta": ""}))
    out = p.events()
    assert sum(isinstance(e, MalformedServerEvent) for e in out) == 3
    unknown = next(e for e in out if isinstance(e, ev.UnknownServerEvent))
    assert unknown.raw["payload"] == 1
    assert BetaProtocolDetected("response.audio.delta", "response.output_audio.delta") in out
    started(p)  # still usable
    assert p.active_response_id == "resp_1"


def test_connection_lost_makes_responses_in_flight_unknown() -> None:
    p = RealtimeProtocol()
    started(p, "resp_9")
    p.connection_lost()
    assert ResponseStatusChanged("resp_9", ResponseStatus.UNKNOWN, "connection lost") in p.events()
    assert p.response_status("resp_9") is ResponseStatus.UNKNOWN
    with pytest.raises(LocalProtocolError):
        p.create_item({"type": "message", "role": "user", "content": []})


def test_server_cancels_on_speech_follows_session_config() -> None:
    p = RealtimeProtocol()
    session = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "interrupt_response": False}}}}
    p.receive(frame({"type": "session.updated", "session": session}))
    assert p.server_cancels_on_speech is False
    session["audio"]["input"]["turn_detection"]["interrupt_response"] = True
    p.receive(frame({"type": "session.updated", "session": session}))
    assert p.server_cancels_on_speech is True
    session["audio"]["input"]["turn_detection"] = None
    p.receive(frame({"type": "session.updated", "session": session}))
    assert p.server_cancels_on_speech is False

