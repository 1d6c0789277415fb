"""The local server's sans-I/O engine, fed plain frames and a hand-driven time (no sockets)."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np
import pytest

from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine import Engine
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import Call, Say, builtin_names, load_scenario, parse_scenario
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import supply_speech
from tests.support.counted_ids import CountedId
from tests.support.engine_harness import (
    CHAR_MS,
    GuardedVoice,
    Harness,
    b64,
    error_of,
    fake_voice,
    only,
    script,
    silence,
    speech,
    types,
)


# Session.


def test_open_sends_the_full_default_session_then_the_conversation() -> None:
    h = Harness()
    assert types(h.opened) == ["session.created", "conversation.created"]
    session = h.opened[0]["session"]
    assert session["type"] == "realtime" and session["model"] == "gpt-realtime-2.1"
    assert session["output_modalities"] == ["audio"] and session["max_output_tokens"] == "inf"
    assert session["tools"] == [] and session["tool_choice"] == "auto" and session["truncation"] == "auto"
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["transcription"] is None
    assert session["audio"]["input"]["turn_detection"] == {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 200,
        "idle_timeout_ms": None,
        "create_response": True,
        "interrupt_response": True,
    }
    assert "do not understand speech" in session["instructions"]
    assert h.opened[1]["conversation"]["object"] == "realtime.conversation"


def test_session_identity_is_sent_like_the_service() -> None:
    config = EngineConfig(session_identity=True, max_session_s=600)
    engine = Engine(config, script({"say": "x"}), fake_voice, wall_time=1_700_000_000.0)
    session = engine.open()[0]["session"]  # keys the service sends but the SDK's model does not declare
    assert session["object"] == "realtime.session" and session["id"].startswith("sess_")
    assert session["expires_at"] == 1_700_000_000 + 600


@pytest.mark.parametrize(
    ("session", "code", "param", "message"),
    [
        (
            {"instructions": "x"},
            "missing_required_parameter",
            "session.type",
            "Missing required parameter: 'session.type'.",
        ),
        (
            {"type": "realtime", "modalities": ["audio"]},
            "unknown_parameter",
            "session.modalities",
            "Unknown parameter: 'session.modalities'.",
        ),
        (
            {"type": "realtime", "instructions": 5},
            "invalid_type",
            "session.instructions",
            "Invalid type for 'session.instructions': expected a string, but got an integer instead.",
        ),
        (
            {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
            "integer_below_min_value",
            "session.audio.input.format.rate",
            None,
        ),
        (
            {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "magic"}}}},
            "invalid_value",
            "session.audio.input.turn_detection.type",
            None,
        ),
        ({"type": "realtime", "max_output_tokens": 5000}, "integer_above_max_value", "session.max_output_tokens", None),
        (
            {"type": "realtime", "output_modalities": ["text", "audio"]},
            "invalid_value",
            "session.output_modalities",
            None,
        ),
        (
            {"type": "realtime", "tools": [{"type": "mcp", "server_label": "x"}]},
            "invalid_value",
            "session.tools[0].type",
            None,
        ),
        ({"type": "realtime", "model": "gpt-other"}, "invalid_value", "session.model", None),
        (
            {"type": "transcription"},
            "invalid_parameter",
            "session.type",
            "Passing a transcription session update event to a realtime session is not allowed.",
        ),
    ],
)
def test_session_update_errors(session: dict[str, Any], code: str, param: str, message: str | None) -> None:
    h = Harness()
    err = error_of(h.send({"type": "session.update", "event_id": "evt_7", "session": {**session}}))
    assert (err["type"], err["code"], err["param"], err["event_id"]) == ("invalid_request_error", code, param, "evt_7")
    if message is not None:
        assert err["message"] == message
    assert h.session() == {**h.opened[0]["session"]}  # nothing was applied


def test_a_rejected_update_is_discarded_whole() -> None:
    h = Harness()
    error_of(h.update(instructions="new", bogus=1))
    assert h.session()["instructions"] == h.opened[0]["session"]["instructions"]


def test_update_merges_fills_defaults_and_null_clears() -> None:
    h = Harness()
    updated = h.update(
        instructions="Be brief.", audio={"input": {"turn_detection": {"type": "server_vad", "threshold": 0.7}}}
    )
    session = updated[0]["session"]
    assert types(updated) == ["session.updated"]
    assert session["instructions"] == "Be brief." and session["output_modalities"] == ["audio"]
    assert session["audio"]["input"]["turn_detection"]["threshold"] == 0.7
    assert session["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 200
    assert session["audio"]["output"]["voice"] == "alloy"
    cleared = h.update(audio={"input": {"turn_detection": None}})[0]["session"]
    assert cleared["audio"]["input"]["turn_detection"] is None
    assert cleared["instructions"] == "Be brief."


def test_voice_is_locked_once_assistant_audio_exists() -> None:
    h = Harness()
    assert types(h.update(audio={"output": {"voice": "marin"}})) == ["session.updated"]
    h.send({"type": "response.create"})
    err = error_of(h.update(audio={"output": {"voice": "cedar"}}))
    assert err["code"] == "cannot_update_voice"
    assert err["message"] == "Cannot update a conversation's voice if assistant audio is present."
    assert types(h.update(audio={"output": {"voice": "marin"}})) == ["session.updated"]


# Robustness.


@pytest.mark.parametrize(
    ("frame", "code", "param"),
    [
        ("{not json", "invalid_json", None),
        ("[1, 2]", "invalid_event", None),
        ('"text"', "invalid_event", None),
        (b"\x00\x01", "invalid_event", None),
        ("{}", "missing_required_parameter", "type"),
        ('{"type": 5}', "invalid_type", "type"),
        ('{"type": "nope"}', "invalid_value", "type"),
        # the beta protocol's own event: the engine says so, and a WebSocket session then closes (test_server_ws)
        ('{"type": "transcription_session.update", "session": {}}', "beta_api_shape_disabled", None),
        ('{"type": "output_audio_buffer.clear"}', "invalid_value", "type"),
        ('{"type": "input_audio_buffer.append"}', "missing_required_parameter", "audio"),
        ('{"type": "input_audio_buffer.append", "audio": 5}', "invalid_type", "audio"),
        ('{"type": "input_audio_buffer.append", "audio": "***"}', "invalid_value", "audio"),
        ('{"type": "response.create", "foo": 1}', "unknown_parameter", "foo"),
        (
            '{"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": "9"}',
            "invalid_type",
            "audio_end_ms",
        ),
        (
            '{"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": -1}',
            "integer_below_min_value",
            "audio_end_ms",
        ),
        ('{"type": "response.cancel", "event_id": 3}', "invalid_type", "event_id"),
    ],
)
def test_bad_frames_get_a_typed_error_and_the_session_stays_usable(
    frame: str | bytes, code: str, param: str | None
) -> None:
    h = Harness()
    err = error_of(h.send(frame))
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", code, param)
    assert types(h.send({"type": "response.create"}))[0] == "response.created"


def test_unknown_type_lists_the_supported_ones() -> None:
    message = error_of(Harness().send({"type": "nope"}))["message"]
    assert message.startswith("Invalid value: 'nope'. Supported values are: 'session.update', ")
    assert message.endswith(", and 'response.cancel'.")


def test_oversize_frames_and_audio_are_refused() -> None:
    h = Harness(max_event_bytes=1000, max_audio_bytes=300)
    assert error_of(h.send("x" * 1001))["code"] == "event_too_large"
    err = error_of(h.send({"type": "input_audio_buffer.append", "audio": b64(silence(0.01))}))
    assert (err["code"], err["param"]) == ("invalid_value", "audio")
    assert h.send({"type": "input_audio_buffer.append", "audio": b64(silence(0.005))}) == []


def test_the_largest_append_the_service_takes_is_taken_and_one_sample_more_is_refused_by_its_own_check() -> None:
    """15 MiB of audio is exactly 20 MiB of base64: the frame limit was 20 MiB, so the largest append the
    documents name was refused as ``event_too_large`` and the engine's own 15 MiB check could never be met."""
    h = Harness()
    largest = b"\x00" * (15 * 1024 * 1024)
    assert h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(largest).decode()}) == []
    h.send({"type": "input_audio_buffer.clear"})
    err = error_of(h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(largest + b"\0\0").decode()}))
    assert (err["code"], err["param"]) == ("invalid_value", "audio")


# Input audio buffer.


def test_commit_under_100_ms_is_refused_with_the_exact_message() -> None:
    h = Harness()
    h.update(audio={"input": {"turn_detection": None}})
    err = error_of(h.send({"type": "input_audio_buffer.commit", "event_id": "c1"}))
    assert err["code"] == "input_audio_buffer_commit_empty" and err["event_id"] == "c1"
    assert err["message"] == (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
        "but buffer only has 0.00ms of audio."
    )
    h.send({"type": "input_audio_buffer.append", "audio": b64(silence(0.04))})
    assert "only has 40.00ms" in error_of(h.send({"type": "input_audio_buffer.commit"}))["message"]


def test_commit_creates_a_user_audio_item_that_retrieve_returns_with_its_audio() -> None:
    h = Harness()
    h.update(audio={"input": {"turn_detection": None}})
    audio = speech(0.3)
    h.send({"type": "input_audio_buffer.append", "audio": b64(audio)})
    events = h.send({"type": "input_audio_buffer.commit"})
    assert types(events) == ["input_audio_buffer.committed", "conversation.item.added", "conversation.item.done"]
    item_id = events[0]["item_id"]
    assert events[0]["previous_item_id"] is None
    assert events[1]["item"]["content"] == [{"type": "input_audio", "transcript": None}]
    retrieved = h.send({"type": "conversation.item.retrieve", "item_id": item_id})[0]["item"]
    assert base64.b64decode(retrieved["content"][0]["audio"]) == audio.astype("<i2").tobytes()
    h.send({"type": "input_audio_buffer.append", "audio": b64(audio)})
    assert h.send({"type": "input_audio_buffer.commit"})[0]["previous_item_id"] == item_id


def test_clear_empties_the_buffer() -> None:
    h = Harness()
    h.update(audio={"input": {"turn_detection": None}})
    h.send({"type": "input_audio_buffer.append", "audio": b64(speech(0.3))})
    assert types(h.send({"type": "input_audio_buffer.clear"})) == ["input_audio_buffer.cleared"]
    assert error_of(h.send({"type": "input_audio_buffer.commit"}))["code"] == "input_audio_buffer_commit_empty"


# Server VAD.


def test_server_vad_reports_padded_start_and_stop_then_commits_and_responds() -> None:
    h = Harness()
    events = h.feed(np.concatenate([silence(1.0), speech(1.2), silence(1.0)]))
    assert types(events)[:5] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    started, stopped, committed = events[:3]
    assert started["audio_start_ms"] == 1000 - 300
    assert stopped["audio_end_ms"] == 2200 + 200
    assert started["item_id"] == stopped["item_id"] == committed["item_id"]
    assert "response.created" in types(events) and types(events)[-1] == "rate_limits.updated"
    audio = h.send({"type": "conversation.item.retrieve", "item_id": committed["item_id"]})[0]["item"]["content"][0][
        "audio"
    ]
    assert len(base64.b64decode(audio)) == (2200 + 200 - 700) * 48


def test_create_response_false_only_commits() -> None:
    h = Harness()
    h.update(audio={"input": {"turn_detection": {"type": "server_vad", "create_response": False}}})
    events = h.feed(np.concatenate([speech(0.5), silence(1.0)]))
    assert "input_audio_buffer.committed" in types(events) and "response.created" not in types(events)


def test_no_turn_detection_means_no_vad_events() -> None:
    h = Harness()
    h.update(audio={"input": {"turn_detection": None}})
    assert h.feed(np.concatenate([speech(0.5), silence(1.0)])) == []


@pytest.mark.parametrize("interrupt", [True, False])
def test_speech_start_cancels_the_active_response_only_with_interrupt_response(interrupt: bool) -> None:
    h = Harness(speed=1.0)
    h.update(
        audio={
            "input": {
                "turn_detection": {"type": "server_vad", "interrupt_response": interrupt, "create_response": False}
            }
        }
    )
    response_id = h.send({"type": "response.create"})[0]["response"]["id"]
    events = h.feed(speech(0.2))
    assert types(events).count("input_audio_buffer.speech_started") == 1
    done = only(events, "response.done")
    if interrupt:
        assert done[0]["response"]["id"] == response_id
        assert done[0]["response"]["status"] == "cancelled"
        assert done[0]["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
        assert types(events).index("input_audio_buffer.speech_started") < types(events).index("response.done")
    else:
        assert [d["response"]["status"] for d in done] == ["completed"]


# Responses.

RESPONSE_TYPES = [
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
    "response.output_audio_transcript.delta",
    "response.output_audio.delta",
    "response.output_audio.delta",
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "conversation.item.done",
    "response.output_item.done",
    "response.done",
    "rate_limits.updated",
]


def test_a_spoken_response_has_the_full_event_sequence_and_exact_audio() -> None:
    h = Harness()
    events = h.send({"type": "response.create"})
    assert types(events) == ["response.created", *RESPONSE_TYPES]
    created, done = events[0]["response"], events[-2]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    assert created["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy"}
    audio = b"".join(base64.b64decode(e["delta"]) for e in only(events, "response.output_audio.delta"))
    assert audio == fake_voice("Hi there.").astype("<i2").tobytes()
    assert [len(base64.b64decode(e["delta"])) for e in only(events, "response.output_audio.delta")] == [
        4800,
        9 * 20 * 48 - 4800,
    ]
    transcript = "".join(e["delta"] for e in only(events, "response.output_audio_transcript.delta"))
    assert transcript == only(events, "response.output_audio_transcript.done")[0]["transcript"] == "Hi there."
    assert events[3]["part"] == {"type": "audio", "transcript": ""}
    assert done["status"] == "completed" and done["status_details"] is None
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": "Hi there."}]
    usage = done["usage"]
    assert usage["output_token_details"] == {"text_tokens": 3, "audio_tokens": 4}  # ceil(9/4), ceil(0.18 s x 20)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    assert events[-1]["rate_limits"][0]["remaining"] == 15_000_000 - usage["total_tokens"]


def test_audio_streams_faster_than_real_time_on_schedule() -> None:
    h = Harness(script({"say": "x" * 50}), speed=4.0, latency_s=0.2)  # 1 s of audio, 10 chunks
    assert types(h.send({"type": "response.create"})) == ["response.created"]
    assert h.engine.next_due() == pytest.approx(0.2)
    times = []
    while (due := h.engine.next_due()) is not None:
        h.now = due
        times += [h.now for e in h.engine.poll(due) if e["type"] == "response.output_audio.delta"]
    assert times == pytest.approx([0.2 + k * 0.025 for k in range(10)])
    assert h.now == pytest.approx(0.2 + 1.0 / 4)


def test_audio_lead_is_how_far_the_audio_sent_is_ahead_of_a_listener_who_began_with_it() -> None:
    """What the pacer reads to stream a reply without waiting for a turn on the loop while its listener is short."""
    h = Harness(script({"say": "x" * 50}), speed=4.0)  # 1 s of audio, 10 chunks of 100 ms, one every 25 ms
    h.send({"type": "response.create"})  # its item opens, and its first chunk goes out at once
    leads = []
    while (due := h.engine.next_due()) is not None:
        h.now = due + (0.3 if len(leads) == 4 else 0.0)  # the fifth chunk goes 300 ms late (a busy loop)
        leads.append(h.engine.audio_lead(h.now))
        h.engine.poll(h.now)  # late, it makes every chunk due by then
    assert leads == pytest.approx([0.1 * k - 0.025 * k for k in range(1, 5)] + [0.5 - 0.425])
    assert h.engine.audio_lead(h.now) is None  # nothing left to stream


def test_one_response_may_hold_several_audio_items() -> None:
    h = Harness(script({"output": [{"say": "One."}, {"say": "Two two."}]}))
    events = h.send({"type": "response.create"})
    added = only(events, "response.output_item.added")
    assert [e["output_index"] for e in added] == [0, 1]
    assert only(events, "conversation.item.added")[1]["previous_item_id"] == added[0]["item"]["id"]
    assert [o["content"][0]["transcript"] for o in events[-2]["response"]["output"]] == ["One.", "Two two."]


def test_max_output_tokens_cuts_the_reply_and_ends_incomplete() -> None:
    h = Harness(script({"output": [{"say": "Hi there."}, {"call": "f", "arguments": "{}"}]}))
    events = h.send({"type": "response.create", "response": {"max_output_tokens": 8}})
    done = events[-2]["response"]
    assert done["status"] == "incomplete"
    assert done["status_details"] == {"type": "incomplete", "reason": "max_output_tokens"}
    assert [o["type"] for o in done["output"]] == ["message"]  # the call did not fit
    assert done["output"][0]["status"] == "incomplete"
    # priced from the text (70 ms of speech per character): "Hi there." 3 + 13 tokens, "Hi" 1 + 3 of 8
    assert done["output"][0]["content"][0]["transcript"] == "Hi"
    assert done["usage"]["output_tokens"] <= 8
    assert h.session()["max_output_tokens"] == "inf"


def test_text_modality_streams_output_text() -> None:
    h = Harness(script({"say": "one two three four five"}))
    events = h.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    assert "response.output_audio.delta" not in types(events)
    assert only(events, "response.content_part.added")[0]["part"] == {"type": "text", "text": ""}
    assert "".join(e["delta"] for e in only(events, "response.output_text.delta")) == "one two three four five"
    assert only(events, "response.output_text.done")[0]["text"] == "one two three four five"
    assert events[-2]["response"]["output"][0]["content"] == [
        {"type": "output_text", "text": "one two three four five"}
    ]


def test_second_create_while_active_is_refused_with_the_active_id() -> None:
    h = Harness(speed=1.0)
    response_id = h.send({"type": "response.create"})[0]["response"]["id"]
    err = error_of(h.send({"type": "response.create", "event_id": "again"}))
    assert err["code"] == "conversation_already_has_active_response" and err["event_id"] == "again"
    assert err["message"] == (
        f"Conversation already has an active response in progress: {response_id}. "
        "Wait until the response is finished before creating a new one."
    )


def test_cancel_without_active_response_fails() -> None:
    err = error_of(Harness().send({"type": "response.cancel"}))
    assert (err["code"], err["message"]) == (
        "response_cancel_not_active",
        "Cancellation failed: no active response found",
    )
    assert (
        error_of(Harness().send({"type": "response.cancel", "response_id": "resp_x"}))["code"]
        == "response_cancel_not_active"
    )


def test_cancel_stops_the_stream_at_once() -> None:
    h = Harness(script({"say": "x" * 100}), speed=4.0)
    sent = h.send({"type": "response.create"}) + h.run(until=0.05)
    assert len(only(sent, "response.output_audio.delta")) == 3
    events = h.send({"type": "response.cancel"})
    assert types(events) == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
        "rate_limits.updated",
    ]
    response = events[-2]["response"]
    assert response["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert response["output"][0]["status"] == "incomplete"
    assert h.run() == [] and h.engine.next_due() is None
    item_id = response["output"][0]["id"]
    err = error_of(
        h.send({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": 301})
    )
    assert err["message"] == "Audio content of 300ms is already shorter than 301ms"


def test_out_of_band_responses_run_alongside_and_stay_out_of_the_conversation() -> None:
    h = Harness(speed=1.0)
    h.send({"type": "response.create"})
    events = h.send({"type": "response.create", "response": {"conversation": "none", "metadata": {"k": "v"}}})
    assert types(events)[:2] == ["response.created", "response.output_item.added"]
    assert "conversation.item.added" not in types(events)
    assert events[0]["response"]["conversation_id"] is None and events[0]["response"]["metadata"] == {"k": "v"}
    rest = events + h.run()
    assert len(only(rest, "response.done")) == 2
    oob_item = only(events, "response.output_item.added")[0]["item"]["id"]
    assert oob_item not in [e["item"]["id"] for e in only(rest, "conversation.item.added")]
    assert (
        error_of(h.send({"type": "conversation.item.retrieve", "item_id": oob_item}))["code"]
        == "item_retrieve_invalid_item_id"
    )


# Tools.


def test_function_calls_stream_arguments_and_the_after_reply_follows_the_outputs() -> None:
    scenario = script(
        {
            "output": [
                {"call": "get_weather", "arguments": {"city": "Paris"}},
                {"call": "get_time", "arguments": "{}"},
            ],
            "after": "Done.",
        },
        {"say": "Next turn."},
    )
    h = Harness(scenario)
    events = h.send({"type": "response.create"})
    calls = [e["item"] for e in only(events, "response.output_item.done")]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    first_deltas = [
        e for e in only(events, "response.function_call_arguments.delta") if e["call_id"] == calls[0]["call_id"]
    ]
    assert len(first_deltas) == 4 and "".join(e["delta"] for e in first_deltas) == '{"city":"Paris"}'
    done = only(events, "response.function_call_arguments.done")[0]
    assert (done["name"], done["arguments"], done["call_id"]) == (
        "get_weather",
        '{"city":"Paris"}',
        calls[0]["call_id"],
    )
    assert "response.output_audio.delta" not in types(events)
    for call in calls:
        item = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"ok": true}'}
        assert types(h.send({"type": "conversation.item.create", "item": item})) == [
            "conversation.item.added",
            "conversation.item.done",
        ]
    reply = h.send({"type": "response.create"})
    assert only(reply, "response.output_audio_transcript.done")[0]["transcript"] == "Done."
    assert (
        only(h.send({"type": "response.create"}), "response.output_audio_transcript.done")[0]["transcript"]
        == "Next turn."
    )


# Conversation items.


def user_text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}], **extra}


def test_item_create_places_items_and_reports_previous_ids() -> None:
    h = Harness()
    a = h.send({"type": "conversation.item.create", "item": user_text("a", id="item_a")})
    assert a[0]["previous_item_id"] is None and a[0]["item"]["status"] == "completed"
    b = h.send({"type": "conversation.item.create", "item": user_text("b", id="item_b")})
    assert b[0]["previous_item_id"] == "item_a"
    root = h.send({"type": "conversation.item.create", "previous_item_id": "root", "item": user_text("r", id="item_r")})
    assert root[0]["previous_item_id"] is None
    after_a = h.send({"type": "conversation.item.create", "previous_item_id": "item_a", "item": user_text("c")})
    assert after_a[0]["previous_item_id"] == "item_a"
    assert (
        error_of(h.send({"type": "conversation.item.create", "previous_item_id": "nope", "item": user_text("x")}))[
            "param"
        ]
        == "previous_item_id"
    )
    assert (
        error_of(h.send({"type": "conversation.item.create", "item": user_text("x", id="item_a")}))["code"]
        == "invalid_value"
    )


@pytest.mark.parametrize(
    ("item", "code", "param"),
    [
        ({"type": "message", "role": "user"}, "missing_required_parameter", "item.content"),
        ({"type": "message", "role": "robot", "content": []}, "invalid_value", "item.role"),
        (
            {"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]},
            "invalid_value",
            "item.content[0].type",
        ),
        (
            {"type": "message", "role": "assistant", "content": [{"type": "output_audio", "audio": ""}]},
            "invalid_value",
            "item.content[0].type",
        ),
        ({"type": "function_call_output", "output": "x"}, "missing_required_parameter", "item.call_id"),
        ({"type": "reasoning"}, "invalid_value", "item.type"),
    ],
)
def test_bad_items_are_refused(item: dict[str, Any], code: str, param: str) -> None:
    err = error_of(Harness().send({"type": "conversation.item.create", "item": item}))
    assert (err["code"], err["param"]) == (code, param)


def test_delete_and_retrieve() -> None:
    h = Harness()
    h.send({"type": "conversation.item.create", "item": user_text("hi", id="item_1")})
    assert h.send({"type": "conversation.item.retrieve", "item_id": "item_1"})[0]["item"]["content"][0]["text"] == "hi"
    deleted = h.send({"type": "conversation.item.delete", "item_id": "item_1"})
    assert types(deleted) == ["conversation.item.deleted"] and deleted[0]["item_id"] == "item_1"
    err = error_of(h.send({"type": "conversation.item.delete", "item_id": "item_1", "event_id": "d"}))
    assert (err["code"], err["message"], err["event_id"]) == (
        "item_delete_invalid_item_id",
        "Error deleting item: the item with id 'item_1' does not exist.",
        "d",
    )
    assert (
        error_of(h.send({"type": "conversation.item.retrieve", "item_id": "item_1"}))["code"]
        == "item_retrieve_invalid_item_id"
    )


# Truncation.


def spoken(h: Harness) -> str:
    events = h.send({"type": "response.create"})
    return only(events, "response.output_item.done")[0]["item"]["id"]


def test_truncate_cuts_audio_and_drops_the_transcript() -> None:
    h = Harness()
    item_id = spoken(h)
    events = h.send({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": 120})
    assert events[0] == {
        **events[0],
        "type": "conversation.item.truncated",
        "item_id": item_id,
        "content_index": 0,
        "audio_end_ms": 120,
    }
    item = h.send({"type": "conversation.item.retrieve", "item_id": item_id})[0]["item"]
    assert len(base64.b64decode(item["content"][0]["audio"])) == 120 * 48
    assert item["content"][0]["transcript"] is None


def test_truncate_errors_follow_the_service() -> None:
    h = Harness()
    item_id = spoken(h)  # 180 ms of audio
    err = error_of(
        h.send({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": 500})
    )
    assert (err["code"], err["param"], err["message"]) == (
        "invalid_value",
        "audio_end_ms",
        "Audio content of 180ms is already shorter than 500ms",
    )
    err = error_of(
        h.send({"type": "conversation.item.truncate", "item_id": "item_nope", "content_index": 0, "audio_end_ms": 1})
    )
    assert err["code"] == "item_truncate_invalid_item_id"
    h.send({"type": "conversation.item.create", "item": user_text("hi", id="item_u")})
    err = error_of(
        h.send({"type": "conversation.item.truncate", "item_id": "item_u", "content_index": 0, "audio_end_ms": 0})
    )
    assert (err["code"], err["message"]) == (
        "unsupported_content_type",
        "Only model output audio messages can be truncated",
    )


def test_an_item_without_assistant_audio_cannot_be_truncated() -> None:
    h = Harness()
    events = h.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    item_id = only(events, "response.output_item.done")[0]["item"]["id"]
    err = error_of(
        h.send({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": 0})
    )
    assert err["code"] == "unsupported_content_type"


def test_cancel_before_the_first_output_leaves_no_items() -> None:
    h = Harness(speed=1.0, latency_s=0.5)
    h.send({"type": "response.create"})
    done = h.send({"type": "response.cancel"})
    assert types(done) == ["response.done", "rate_limits.updated"]
    assert done[0]["response"]["output"] == [] and h.run() == []


def test_truncating_the_item_being_streamed_stops_its_audio() -> None:
    h = Harness(script({"output": [{"say": "x" * 50}, {"say": "yy"}]}), speed=4.0)
    first = h.send({"type": "response.create"}) + h.run(until=0.03)
    item_id = only(first, "response.output_item.added")[0]["item"]["id"]
    events = h.send({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": 150})
    assert types(events)[:2] == ["conversation.item.truncated", "response.output_audio.done"]
    rest = h.run()
    assert all(e["item_id"] != item_id for e in only(rest, "response.output_audio.delta"))
    assert only(rest, "response.done")[0]["response"]["status"] == "completed"


# Timers.


@pytest.mark.parametrize(("seconds", "message"), [(3600, "60 minutes"), (120, "2 minutes"), (30, "1 minute")])
def test_session_expired_message(seconds: float, message: str) -> None:
    err = Harness(max_session_s=seconds).engine.expire()[0]["error"]
    assert (err["code"], err["message"]) == ("session_expired", f"Your session hit the maximum duration of {message}.")


def test_idle_timeout_triggers_after_playback_and_prompts_a_response() -> None:
    h = Harness(script({"say": "x" * 50}), speed=2.0)  # 1 s of audio, sent in 0.5 s
    h.update(audio={"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 2000}}})
    h.send({"type": "response.create"})
    assert only(h.run(until=0.6), "response.done")
    assert h.engine.next_due() == pytest.approx(0.5 + 1.0 + 2.0)
    events = h.run(until=3.5)
    assert types(events)[:4] == [
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    assert events[0]["item_id"] == events[1]["item_id"] and "response.created" in types(events)


def test_configured_transcription_reports_that_it_is_unavailable() -> None:
    h = Harness()
    h.update(audio={"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}, "turn_detection": None}})
    h.send({"type": "input_audio_buffer.append", "audio": b64(speech(0.2))})
    events = h.send({"type": "input_audio_buffer.commit"})
    failed = only(events, "conversation.item.input_audio_transcription.failed")[0]
    assert failed["item_id"] == events[0]["item_id"] and "does not transcribe" in failed["error"]["message"]


# G.711.


def test_g711_sessions_count_8k_bytes() -> None:
    from voxline.audio.g711 import ulaw_encode

    h = Harness()
    fmt = {"type": "audio/pcmu"}
    h.update(audio={"input": {"format": fmt}, "output": {"format": fmt}})
    pcm8k = speech(1.0)[::3]
    signal = np.concatenate([np.zeros(4000, np.int16), pcm8k[:4000], np.zeros(8000, np.int16)])
    events = h.send(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(ulaw_encode(signal).tobytes()).decode()}
    )
    assert only(events, "input_audio_buffer.speech_started")[0]["audio_start_ms"] == 500 - 300
    assert only(events, "input_audio_buffer.speech_stopped")[0]["audio_end_ms"] == 1000 + 200
    audio = b"".join(base64.b64decode(e["delta"]) for e in only(events, "response.output_audio.delta"))
    assert len(audio) == 9 * CHAR_MS * 8  # "Hi there." at 8 bytes per ms


# Scenarios.


def test_a_conversation_rebuilt_after_a_drop_goes_on_after_its_tool_output() -> None:
    """A client rebuilds the conversation on a fresh session: the call and its output, then response.create. A
    model goes on from the output; the stand-in did its script from the start and asked for the tool again."""
    scenario = script({"output": [{"say": "Let me check."}, {"call": "get_weather", "arguments": {"city": "Paris"}}],
                       "after": "Sunny in Paris."}, {"say": "Next turn."})
    h = Harness(scenario)
    call = {"id": "item_f", "type": "function_call", "call_id": "call_1", "name": "get_weather",
            "arguments": '{"city":"Paris"}'}
    h.send({"type": "conversation.item.create", "previous_item_id": "root", "item": user_text("weather?")})
    h.send({"type": "conversation.item.create", "item": call})
    h.send({"type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "call_1", "output": '{"sky":"clear"}'}})
    reply = h.send({"type": "response.create"})
    assert not only(reply, "response.function_call_arguments.done")
    assert only(reply, "response.output_audio_transcript.done")[0]["transcript"] == "Sunny in Paris."
    assert only(h.send({"type": "response.create"}), "response.output_audio_transcript.done")[0]["transcript"] == (
        "Next turn.")


def test_builtin_scenarios_load() -> None:
    assert {"default", "long", "tools"} <= set(builtin_names())
    assert load_scenario().name == "default"
    long = load_scenario("long").turns[0].outputs[0]
    assert isinstance(long, Say) and len(long.text) > 200  # well over 6 s of speech
    tools = load_scenario("tools")
    assert isinstance(tools.turns[0].outputs[1], Call) and tools.turns[0].after == (
        Say("I have the weather report now. Thank you for waiting."),
    )


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"turns": []},
        {"turns": [{"say": "a", "output": [{"say": "b"}]}]},
        {"turns": [{"say": "a", "after": "b"}]},
        {"turns": [{"output": [{"call": "f", "arguments": "{bad"}]}]},
        {"turns": [{"say": "a"}], "after_last": "explode"},
        {"turns": [{"say": "a", "colour": "red"}]},
    ],
)
def test_bad_scenarios_are_configuration_errors(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        parse_scenario(data)


def test_unknown_scenario_name_lists_the_builtins() -> None:
    with pytest.raises(ConfigurationError, match="default"):
        load_scenario("no-such-scenario")


def test_placeholders_echo_what_was_heard_and_turns_repeat_last() -> None:
    h = Harness(script({"say": "Heard {user_seconds} s: {user_text}, turn {turn}."}, after_last="repeat_last"))
    h.update(audio={"input": {"turn_detection": None}})
    h.send({"type": "conversation.item.create", "item": user_text("hello")})
    h.send({"type": "input_audio_buffer.append", "audio": b64(speech(1.5))})
    h.send({"type": "input_audio_buffer.commit"})
    first = only(h.send({"type": "response.create"}), "response.output_audio_transcript.done")[0]["transcript"]
    assert first == "Heard 1.5 s: hello, turn 1."
    second = only(h.send({"type": "response.create"}), "response.output_audio_transcript.done")[0]["transcript"]
    assert second == "Heard 1.5 s: hello, turn 2."


# Speech: the engine reads a voice cache and waits for the driver's speech; it never synthesizes.


def waiting_engine(latency_s: float = 0.0) -> tuple[Engine, GuardedVoice]:
    scenario = script({"say": "Fixed."}, {"say": "You are on turn {turn}."})
    voice = GuardedVoice()
    pacing = Pacing(speed=math.inf, chunk_ms=100, latency_s=latency_s)
    engine = Engine(EngineConfig(pacing=pacing), scenario, VoiceCache.for_scenario(scenario, voice), wall_time=0.0)
    engine.open()
    voice.engine_busy = True  # from here on the fake voice raises if the engine calls it
    return engine, voice


def test_fixed_replies_come_from_the_cache_without_waiting() -> None:
    engine, voice = waiting_engine()
    assert voice.said.count("Fixed.") == 1  # voiced once, when the cache was filled
    events = engine.receive(json.dumps({"type": "response.create"}), 0.0) + engine.poll(0.0)
    assert engine.speech_needed() == []
    assert only(events, "response.output_audio_transcript.done")[0]["transcript"] == "Fixed."
    assert only(events, "response.done")[0]["response"]["status"] == "completed"


def test_a_placeholder_reply_waits_until_the_driver_provides_its_speech() -> None:
    engine, voice = waiting_engine(latency_s=0.25)
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    engine.poll(0.25)
    assert engine.next_due() is None and engine.speech_needed() == []
    events = engine.receive(json.dumps({"type": "response.create"}), 1.0)
    assert types(events) == ["response.created"]
    assert engine.speech_needed() == ["You are on turn 2."]
    assert engine.next_due() is None  # waiting: nothing is scheduled
    assert engine.poll(5.0) == [] and engine.speech_needed() == ["You are on turn 2."]
    voice.engine_busy = False
    assert supply_speech(engine, voice, 5.0) == 1  # the driver voices it, outside the engine
    voice.engine_busy = True
    assert voice.said[-1] == "You are on turn 2." and voice.said.count("You are on turn 2.") == 1
    assert engine.speech_needed() == [] and engine.next_due() == 5.0  # streams from when it was voiced
    events = Harness.check(engine.poll(5.0))
    audio = b"".join(base64.b64decode(e["delta"]) for e in only(events, "response.output_audio.delta"))
    assert audio == fake_voice("You are on turn 2.").astype("<i2").tobytes()
    assert only(events, "response.output_audio_transcript.done")[0]["transcript"] == "You are on turn 2."
    assert only(events, "response.done")[0]["response"]["status"] == "completed"


def test_the_latency_still_applies_when_speech_arrives_early() -> None:
    engine, voice = waiting_engine(latency_s=0.25)
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    engine.poll(0.25)
    engine.receive(json.dumps({"type": "response.create"}), 1.0)
    engine.provide_speech("You are on turn 2.", fake_voice("You are on turn 2."), 1.1)
    assert engine.next_due() == 1.25


def test_a_cancelled_waiting_response_ends_and_ignores_late_speech() -> None:
    engine, voice = waiting_engine()
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    engine.poll(0.0)
    engine.receive(json.dumps({"type": "response.create"}), 1.0)
    events = Harness.check(engine.receive(json.dumps({"type": "response.cancel"}), 1.5))
    assert only(events, "response.done")[0]["response"]["status"] == "cancelled"
    assert engine.speech_needed() == []
    engine.provide_speech("You are on turn 2.", fake_voice("You are on turn 2."), 2.0)
    assert engine.next_due() is None and engine.poll(2.0) == []


def test_max_output_tokens_prices_speech_from_the_text_without_synthesizing() -> None:
    scenario = script({"say": "One two three."})
    voice = GuardedVoice()
    cache = VoiceCache.for_scenario(scenario, voice)
    engine = Engine(EngineConfig(pacing=Pacing(speed=math.inf)), scenario, cache, wall_time=0.0)
    voice.engine_busy = True
    # "One two three." is priced 4 + 20 tokens, "One" 1 + 5: the cut reply is a new text to voice
    events = engine.receive(json.dumps({"type": "response.create", "response": {"max_output_tokens": 12}}), 0.0)
    assert types(events) == ["response.created"] and engine.speech_needed() == ["One"]
    voice.engine_busy = False
    supply_speech(engine, voice, 0.0)
    done = only(Harness.check(engine.poll(0.0)), "response.done")[0]["response"]
    assert done["status"] == "incomplete" and done["output"][0]["content"][0]["transcript"] == "One"
    assert done["usage"]["output_tokens"] == 1 + 2  # from the audio actually sent: 3 x 20 ms


async def test_the_speech_supplier_voices_off_the_event_loop() -> None:
    import asyncio
    import threading

    from voxline.base.clock import VirtualClock
    from voxline.realtime.server.net.voicer import SpeechSupplier

    engine, voice = waiting_engine()
    voice.engine_busy = False
    threads: list[str] = []

    def synth(text: str) -> np.ndarray:
        threads.append(threading.current_thread().name)
        return voice(text)

    clock, voiced = VirtualClock(3.0), asyncio.Event()
    supplier = SpeechSupplier(engine, synth, clock, voiced.set)
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    engine.poll(0.0)
    engine.receive(json.dumps({"type": "response.create"}), 1.0)
    supplier.check()
    job = asyncio.create_task(supplier.run())
    try:
        async with asyncio.timeout(10):
            await voiced.wait()
    finally:
        job.cancel()
    assert threads and threads[0] != threading.main_thread().name
    assert engine.speech_needed() == [] and engine.next_due() == 3.0


# Bursts: steps due within the pacing's burst go out with the poll that reaches the first.


def streamed(burst_s: float) -> list[list[str]]:
    """The event types of each poll that returned any, polling at every due time of a 4x stream."""
    scenario = script({"say": "A reply long enough for a dozen chunks of audio, and then some more words."})
    config = EngineConfig(pacing=Pacing(speed=4.0, chunk_ms=100, burst_s=burst_s))
    engine = Engine(config, scenario, VoiceCache.for_scenario(scenario, fake_voice), wall_time=0.0)
    engine.open()
    polls = [types(engine.receive(json.dumps({"type": "response.create"}), 0.0))]
    while (due := engine.next_due()) is not None:
        polls.append(types(engine.poll(due)))
    return [p for p in polls if p]


def test_a_burst_sends_the_same_events_in_fewer_polls_and_none_early_beyond_it() -> None:
    exact, burst = streamed(0.0), streamed(0.03)
    assert sum(exact, []) == sum(burst, [])  # the same events in the same order
    chunks = [p.count("response.output_audio.delta") for p in exact]
    assert max(chunks) == 1 and sum(chunks) >= 10  # without a burst, one 100 ms chunk a poll (every 25 ms)
    paired = [p.count("response.output_audio.delta") for p in burst]
    assert max(paired) == 2 and sum(paired) == sum(chunks)  # 30 ms takes the chunk due 25 ms later too, no more
    assert len(burst) < 0.6 * len(exact)


def idle_deadline(burst_s: float) -> float:
    """When the idle timeout is due after a reply, polling at every due time."""
    config = EngineConfig(pacing=Pacing(speed=4.0, chunk_ms=100, burst_s=burst_s))
    scenario = script({"say": "A reply of a few chunks, then the user says nothing."})
    engine = Engine(config, scenario, VoiceCache.for_scenario(scenario, fake_voice), wall_time=0.0)
    engine.open()
    engine.receive(json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {
        "turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}}}}), 0.0)
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    while (due := engine.next_due()) is not None:
        if "input_audio_buffer.timeout_triggered" in types(engine.poll(due)):
            return due
    raise AssertionError("no idle timeout")


def test_a_burst_never_brings_the_idle_timeout_forward() -> None:
    # response.done may go out up to a burst early; the idle timer still runs from when it was due
    assert idle_deadline(0.03) == idle_deadline(0.0)
    assert idle_deadline(0.5) == idle_deadline(0.0)


def two_responses(burst_s: float) -> list[str]:
    """The events of a default response and an out-of-band one streaming at the same time, in order."""
    config = EngineConfig(pacing=Pacing(speed=4.0, chunk_ms=100, burst_s=burst_s))
    scenario = script({"say": "The first reply, long enough for several chunks."},
                      {"say": "The second reply, also several chunks long."})
    engine = Engine(config, scenario, VoiceCache.for_scenario(scenario, fake_voice), wall_time=0.0, ids=IdFactory(7))
    engine.open()
    events = engine.receive(json.dumps({"type": "response.create"}), 0.0)
    events += engine.receive(json.dumps({"type": "response.create", "response": {"conversation": "none"}}), 0.0)
    while (due := engine.next_due()) is not None:
        events += engine.poll(due)
    return [f"{e.get('response_id') or e.get('response', {}).get('id')}:{e['type']}" for e in events]


def test_a_burst_keeps_the_order_of_two_responses_streaming_at_once() -> None:
    exact = two_responses(0.0)
    assert len({e.split(":")[0] for e in exact} - {"None"}) == 2  # None: events of neither (rate limits)
    assert two_responses(0.03) == exact


@pytest.mark.parametrize("field, value", [("burst_s", -1.0), ("burst_s", math.nan), ("burst_s", 2.0),
                                          ("speed", 0.0), ("chunk_ms", 0), ("latency_s", -0.1)])
def test_pacing_refuses_what_would_never_send_or_send_everything(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=field):
        Pacing(**{field: value})


@pytest.mark.parametrize(("frame", "code", "param"), [
    ('{"type": "output_audio_buffer.clear", "event_id": 5}', "invalid_type", "event_id"),
    ('{"type": "output_audio_buffer.clear", "junk": {"a": 1}}', "unknown_parameter", "junk"),
])
def test_a_calls_clear_with_a_bad_field_is_refused_as_any_event(frame: str, code: str, param: str) -> None:
    """Over a call's data channel a clear with a bad field was taken, where every other event gets an error."""
    from voxline.realtime.server.engine.rtc_bridge import CallBridge

    harness = Harness()
    sent: list[dict[str, Any]] = []
    bridge = CallBridge(harness.engine, sent.append, IdFactory(3))
    bridge.client_frame(frame, 0.0)
    errors = [e for e in sent if e["type"] == "error"]
    assert [(e["error"]["code"], e["error"]["param"]) for e in errors] == [(code, param)]
    assert not any(e["type"] == "output_audio_buffer.cleared" for e in sent)
    sent.clear()
    bridge.client_frame('{"type": "output_audio_buffer.clear", "event_id": "c1"}', 0.0)  # a good one is taken
    assert not any(e["type"] == "error" for e in sent)


@pytest.mark.parametrize("sideband", [False, True])
def test_a_binary_message_that_spells_the_clear_is_refused_like_any_binary_message(sideband: bool) -> None:
    """A binary ``output_audio_buffer.clear`` cleared the call's audio while the error for every other binary message
    said binary messages are not taken. Now it gets that error too, and the audio plays on."""
    from voxline.realtime.server.engine.rtc_bridge import CallBridge

    harness = Harness()
    sent: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []
    bridge = CallBridge(harness.engine, sent.append, IdFactory(3))
    bridge.client_frame(b'{"type": "output_audio_buffer.clear", "event_id": "c1"}', 0.0,
                        replies.append if sideband else None)
    errors = [e for e in (replies if sideband else sent) if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["invalid_event"]
    assert ("WebSocket" in errors[0]["error"]["message"]) is sideband
    assert not any(e["type"] == "output_audio_buffer.cleared" for e in sent + replies)


def test_the_servers_conversation_places_finds_and_deletes_recent_items_at_the_same_cost_however_long() -> None:
    """A rebuild's creates each looked through every item from the first: 10,000 items took 0.7 s of the server's
    loop, 50,000 took 14 s. Recent items are looked for among the newest first."""
    from voxline.base.ordered import TAIL
    from voxline.realtime.server.engine.conversation import Conversation, Entry

    conversation = Conversation(keep_audio=False)
    for n in range(5000):
        conversation.insert(Entry({"id": CountedId(f"item_{n}"), "type": "message"}), conversation.last_id)
    CountedId.compared = 0
    assert conversation.insert(Entry({"id": CountedId("item_new"), "type": "message"}), "item_4999") == "item_4999"
    assert conversation.previous_id("item_new") == "item_4999"
    conversation.delete("item_4998")
    assert CountedId.compared <= 3 * TAIL + 8  # a few dozen steps each, not thousands
    assert [entry.item["id"] for entry in conversation][-3:] == ["item_4997", "item_4999", "item_new"]


def test_a_conversation_keeps_its_newest_items_audio_within_its_budget() -> None:
    """`voxline serve` kept every item's audio for retrieves: 180 MB a busy session-hour, for sessions allowed a
    week. Past the budget the oldest items let go of theirs (a retrieve gives them without audio)."""
    from voxline.realtime.server.engine.conversation import Conversation, Entry

    def user(item_id: str, size: int) -> Entry:
        return Entry({"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_audio"}]},
                     {0: [b"\x01\x00" * (size // 2)]})

    conversation = Conversation(kept_audio_bytes=1000)
    for n in range(5):
        conversation.insert(user(f"item_{n}", 400))
    kept = [bool(entry.audio) for entry in conversation]
    assert kept == [False, False, False, True, True] and conversation.audio_budget.held == 800
    assert "audio" not in conversation.retrieve("item_0")["content"][0]
    assert len(conversation.retrieve("item_4")["content"][0]["audio"]) > 0
    assert [entry.audio_ms(0) for entry in conversation] == [pytest.approx(400 / 48)] * 5  # lengths stay known
    conversation.delete("item_4")
    assert conversation.audio_budget.held == 400
    # a reply's audio counts as it streams, and past the budget the oldest let go at once, not at the next item
    streamed = Entry({"id": "item_s", "type": "message", "role": "assistant", "content": [{"type": "output_audio"}]})
    conversation.insert(streamed)
    streamed.add_audio(0, b"\x00" * 300)
    assert conversation.audio_budget.held == 700
    streamed.add_audio(0, b"\x00" * 500)
    assert conversation.audio_budget.held == 800 and not conversation.get("item_3").audio  # type: ignore[union-attr]
    streamed.cut_audio(0, 100)
    assert conversation.audio_budget.held == 100 == sum(len(c) for e in conversation for cs in e.audio.values()
                                                        for c in cs)


def test_an_item_deleted_and_made_again_under_its_id_keeps_its_audio_in_its_turn() -> None:
    """The budget's queue held the deleted item's id: made again, the new item let go of its audio out of turn."""
    from voxline.realtime.server.engine.conversation import Conversation, Entry

    def user(item_id: str, size: int) -> Entry:
        return Entry({"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_audio"}]},
                     {0: [b"\x01" * size]})

    conversation = Conversation(kept_audio_bytes=1000)
    conversation.insert(user("x", 100))
    conversation.delete("x")
    for item_id in ("a", "x", "b"):
        conversation.insert(user(item_id, 400))
    assert {e.item["id"]: bool(e.audio) for e in conversation} == {"a": False, "x": True, "b": True}
    conversation.delete("x")
    conversation.insert(user("x", 2000))  # alone past the budget: the newest keeps its audio
    assert {e.item["id"]: bool(e.audio) for e in conversation} == {"a": False, "b": False, "x": True}


def test_a_reply_streaming_past_the_budget_keeps_its_audio_and_text_items_cost_nothing() -> None:
    """Letting an item go called back into the budget's loop, which then took the streaming reply for an old one:
    it lost its audio, and every chunk after; and each item without audio let go was a deeper call (600 text
    items were a RecursionError)."""
    from voxline.realtime.server.engine.conversation import Conversation, Entry

    def user(item_id: str, size: int) -> Entry:
        return Entry({"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_audio"}]},
                     {0: [b"\x01" * size]})

    conversation = Conversation(kept_audio_bytes=1000)
    conversation.insert(user("a", 100))
    reply = Entry({"id": "e", "type": "message", "role": "assistant", "content": [{"type": "output_audio"}]})
    conversation.insert(reply)
    conversation.insert(user("u", 400))  # typed while the reply streams
    reply.add_audio(0, b"\x00" * 900)
    assert {e.item["id"]: len(e.kept_audio(0)) for e in conversation} == {"a": 0, "e": 900, "u": 0}
    reply.add_audio(0, b"\x00" * 50)
    assert len(reply.kept_audio(0)) == 950 and conversation.audio_budget.held == 950

    many = Conversation(kept_audio_bytes=1000)
    for n in range(3000):
        many.insert(Entry({"id": f"t{n}", "type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "hi"}]}))
    many.insert(user("x", 600))
    many.insert(user("y", 600))
    assert many.audio_budget.held == 600 and not many.get("x").audio  # type: ignore[union-attr]
