"""SessionCore on plain lists: what reaches the application."""

from __future__ import annotations

import base64
import json

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.core import SessionCore
from voxline.session.events import CutAdjusted
from voxline.session.track_audio import TrackTagger
from tests.support.protocol_frames import frame, sent


def test_a_clamped_cut_is_reported_to_the_application() -> None:
    p = RealtimeProtocol()
    core = SessionCore(p, PlayoutBuffer())
    event_id = p.truncate("item_x", 900)
    sent(p)
    p.receive(frame({"type": "error", "error": {"type": "invalid_request_error", "code": "invalid_value",
                                                "message": "Audio content of 850ms is already shorter than 900ms",
                                                "param": "audio_end_ms", "event_id": event_id}}))
    events = [e for out in p.events() for e in core.handle(out, 0.0).events]
    assert CutAdjusted("item_x", 900, 850, 0.0) in events


def test_track_audio_is_tagged_by_the_servers_playback_state() -> None:
    playout = PlayoutBuffer()
    tagger = TrackTagger(playout, grace_ms=40)
    block = np.ones(480, np.int16)
    tagger.on_audio(block)  # nothing playing: not the assistant
    assert playout.queued_samples == 0
    item = {"id": "item_a", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    for payload in (
        {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item},
        {"type": "output_audio_buffer.started", "response_id": "resp_1"},
    ):
        tagger.handle(ev.parse_server_event(json.dumps({"event_id": "e", **payload})))
    tagger.on_audio(block)
    assert playout.received_samples("item_a", 0) == 480 and tagger.audible and tagger.server_playing
    tagger.handle(ev.parse_server_event(json.dumps({"event_id": "e", "type": "output_audio_buffer.stopped",
                                                    "response_id": "resp_1"})))
    tagger.on_audio(block)  # late frames within the grace still belong to the item
    tagger.on_audio(block)
    tagger.on_audio(block)
    assert playout.received_samples("item_a", 0) == 3 * 480 and not tagger.audible


def test_keys_never_show_in_settings_or_session_reprs() -> None:
    from voxline.session import SessionSettings, VoiceSession

    secret = "sk-proj-abcdefghijklmnop"
    settings = SessionSettings(api_key=secret)
    assert secret not in repr(settings) and secret not in str(settings.model_dump())
    assert secret not in repr(VoiceSession(settings))
    assert settings.api_key is not None and settings.api_key.get_secret_value() == secret


def test_a_barge_in_returns_its_cut_and_the_commands_it_queued() -> None:
    p, playout = RealtimeProtocol(), PlayoutBuffer()
    core = SessionCore(p, playout)
    p.update_session({"type": "realtime", "audio": {"input": {"turn_detection": {
        "type": "server_vad", "interrupt_response": False}}}})
    sent(p)
    item = {"id": "item_a", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    response = {"id": "resp_1", "object": "realtime.response", "status": "in_progress", "output": []}
    audio = base64.b64encode(np.ones(4800, "<i2").tobytes()).decode()  # 200 ms received
    effects = []
    for payload in (
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item},
        {"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "item_a", "output_index": 0,
         "content_index": 0, "delta": audio},
    ):
        p.receive(frame(payload))
        effects += [core.handle(out, 0.0) for out in p.events()]
    assert all(e.barge_in is None and e.commands == () for e in effects)
    playout.read_into(np.zeros(2400, np.int16), 0.0)  # 100 ms reach the listener
    assert core.tick(0.1).barge_in is None
    p.receive(frame({"type": "input_audio_buffer.speech_started", "item_id": "item_u", "audio_start_ms": 0}))
    (out,) = p.events()
    result = core.handle(out, 0.1)
    barge_in = result.barge_in
    assert barge_in is not None and barge_in in result.events
    assert barge_in.cut is not None and barge_in.cut.item_id == "item_a" and barge_in.cut.heard_samples == 2400
    assert result.commands == (ev.ConversationItemTruncate(item_id="item_a", audio_end_ms=100), ev.ResponseCancel())
    wire = [e["type"] for e in sent(p)]
    assert wire == ["conversation.item.truncate", "response.cancel"]


def test_a_turn_begun_on_the_last_connection_is_not_open_on_the_next() -> None:
    """The new server never heard the turn's start, and will not end it: before, the session counted the user as
    speaking for good (a hand-over waited on it, and a replay blamed the recording for a turn left open)."""
    p = RealtimeProtocol()
    core = SessionCore(p, PlayoutBuffer())
    p.receive(frame({"type": "input_audio_buffer.speech_started", "item_id": "item_u", "audio_start_ms": 0}))
    for out in p.events():
        core.handle(out, 0.0)
    assert core.user_speaking
    core.protocol = RealtimeProtocol()
    core.new_connection()
    assert not core.user_speaking
