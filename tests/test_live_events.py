"""GPT-Live wire events against the official ``openai`` package's live types (tests/support/live_oracle.py)."""

from __future__ import annotations

import base64
import json

import pytest

import voxline.realtime.live.events as lv
from voxline.realtime.errors import RemoteProtocolError
from tests.support.live_oracle import (
    LIVE_CLIENT_TYPES, LIVE_PRIMARY_SERVER_TYPES, LIVE_SERVER_TYPES, check_live_client_event, check_live_server_event,
)

AUDIO = base64.b64encode(b"\x00\x01" * 240).decode()
SESSION = {"id": "sess_1", "model": "gpt-live-1", "expires_at": 1_800_000_000, "status": "active"}
USAGE = {"seconds": 12.0}

SERVER_SAMPLES: list[dict[str, object]] = [
    {"type": "session.started", "event_id": "e1", "session": SESSION},
    {"type": "session.updated", "event_id": "e2", "session": SESSION, "client_event_id": "c1"},
    {"type": "session.closed", "event_id": "e3", "reason": "close_requested", "session": SESSION, "usage": USAGE},
    {"type": "session.input_audio.append", "audio": AUDIO},
    {"type": "session.input_audio.muted", "event_id": "e4"},
    {"type": "session.input_audio.unmuted", "event_id": "e5"},
    {"type": "session.input_transcript.delta", "event_id": "e6", "delta": "hello", "start_ms": 100, "end_ms": 500},
    {"type": "session.output_transcript.delta", "event_id": "e7", "delta": " Hi", "start_ms": 900, "end_ms": 1100},
    {"type": "session.output_audio.delta", "delta": AUDIO},
    {"type": "session.output_audio.delta", "delta": AUDIO, "start_ms": 900, "end_ms": 910},
    {"type": "session.output_audio.fixture.playing", "event_id": "e8"},
    {"type": "session.output_audio.fixture.played", "event_id": "e9"},
    {"type": "session.instructions.appended", "event_id": "e10", "start_ms": 5, "end_ms": 5},
    {"type": "session.thinking.appended", "event_id": "e11", "start_ms": 5, "end_ms": 5},
    {"type": "session.commentary.appended", "event_id": "e12", "start_ms": 5, "end_ms": 5},
    {"type": "session.delegation.created", "event_id": "e13", "offset_ms": 1200,
     "delegation": {"id": "del_1", "target": "client", "type": "delegation"}},
    {"type": "session.usage.updated", "event_id": "e14", "usage": USAGE, "context_window": {"usage_ratio": 0.1}},
    {"type": "response.event", "event_id": "e15", "delegation_id": "del_1",
     "event": {"type": "response.output_text.delta", "content_index": 0, "delta": "ok", "item_id": "msg_1",
               "logprobs": [], "output_index": 0, "sequence_number": 3}},
    {"type": "decision.event", "event_id": "e16", "delegation_id": None,
     "event": {"type": "decision.completed", "decision": {"model": "m", "answers": [], "usage": {
         "input_tokens": 1, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0}, "output_tokens": 1,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}}}},
    {"type": "decision.item.created", "event_id": "e17",
     "item": {"id": "it_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}},
    {"type": "decision.item.deleted", "event_id": "e18", "item_id": "it_1"},
    {"type": "info", "event_id": "e19", "code": "data_channel_permissions", "message": "limited"},
    {"type": "error", "event_id": "e20",
     "error": {"type": "invalid_request_error", "code": "unknown_parameter", "message": "no"}},
    {"type": "transport.dtmf.received", "event_id": "e21", "event": "5"},
    {"type": "transport.dtmf.send", "event_id": "e22", "event": "5"},
    {"type": "transport.dtmf.sent", "event_id": "e23", "event": "5"},
    {"type": "transport.ringing", "event_id": "e24", "session_id": "sess_1"},
    {"type": "transport.answered", "event_id": "e25", "session_id": "sess_1"},
    {"type": "transport.failed", "event_id": "e26", "session_id": "sess_1",
     "error": {"type": "call_error", "code": "busy", "message": "busy"}},
]

CLIENT_SAMPLES: list[lv.LiveClientEvent] = [
    lv.LiveStart(session={"model": "gpt-live-1", "instructions": "Be brief.",
                          "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "marin"}},
                          "delegation": {"type": "client"}, "store": True}),
    lv.LiveUpdate(event_id="c1", session={"delegation": {"type": "client", "acknowledgement_delay_ms": 0}}),
    lv.LiveClose(),
    lv.LiveAudioAppend(audio=AUDIO),
    lv.LiveMute(event_id="c2"),
    lv.LiveUnmute(),
    lv.LiveInstructionsAppend(content="They heard up to 'Hi'."),
    lv.LiveThinkingAppend(content="working", delegation_id="del_1"),
    lv.LiveCommentaryAppend(content="It is sunny.", delegation_id="del_1"),
    lv.LiveFixturePlay(audio=AUDIO),
    lv.LiveResponseCreate(),
    lv.LiveResponseItemCreate(item={"type": "function_call_output", "call_id": "call_1", "output": "{}"}),
    lv.LiveDecisionCreate(event_id="c3"),
    lv.LiveDecisionItemCreate(item={"type": "function_call_output", "call_id": "call_1", "output": "{}"}),
    lv.LiveDecisionItemDelete(item_id="it_1"),
]


def test_the_vocabulary_is_the_sdks_and_kept_apart_from_realtimes() -> None:
    import voxline.realtime.events as rt

    assert lv.LIVE_SERVER_EVENT_TYPES == LIVE_PRIMARY_SERVER_TYPES and len(LIVE_PRIMARY_SERVER_TYPES) == 28
    assert lv.LIVE_CLIENT_EVENT_TYPES == LIVE_CLIENT_TYPES and len(LIVE_CLIENT_TYPES) == 15
    assert lv.LIVE_SIDEBAND_EVENT_TYPES == LIVE_SERVER_TYPES  # a sideband's union
    assert not any(name.startswith("Live") for name in rt.__all__)  # no Live name leaks into Realtime's vocabulary


def test_every_server_type_parses_and_round_trips_to_what_openai_accepts() -> None:
    seen = set()
    for sample in SERVER_SAMPLES:
        check_live_server_event(sample)  # the sample itself is the service's shape
        event = lv.parse_live_server(json.dumps(sample))
        assert not isinstance(event, lv.LiveUnknownEvent), sample["type"]
        assert event.model_dump(mode="json") == sample
        seen.add(sample["type"])
    assert seen == LIVE_PRIMARY_SERVER_TYPES


@pytest.mark.parametrize("event", CLIENT_SAMPLES, ids=lambda e: e.type)
def test_every_client_event_is_valid_per_openai_with_no_unknown_keys(event: lv.LiveClientEvent) -> None:
    check_live_client_event(lv.dump_live(event))


def test_client_samples_cover_the_vocabulary() -> None:
    assert {e.type for e in CLIENT_SAMPLES} == LIVE_CLIENT_TYPES


def test_sideband_types_parse_as_well() -> None:
    paused = lv.parse_live_server('{"type":"session.paused","event_id":"e1"}')
    assert isinstance(paused, lv.LiveSessionPaused)
    check_live_server_event(paused.model_dump(mode="json"), "sideband")
    check_live_client_event(lv.dump_live(lv.LiveDtmfSend(event="5")), "sideband")


def test_an_unknown_type_passes_through_raw_and_unknown_keys_are_kept() -> None:
    event = lv.parse_live_server('{"type":"session.future","x":1}')
    assert isinstance(event, lv.LiveUnknownEvent) and event.raw == {"type": "session.future", "x": 1}
    kept = lv.parse_live_server('{"type":"info","event_id":"e","code":"c","message":"m","new_key":2}')
    assert kept.model_dump(mode="json")["new_key"] == 2


@pytest.mark.parametrize("frame", ["nope", "[]", '{"type": 3}',
                                   '{"type":"session.output_transcript.delta","event_id":"e","delta":"x"}',
                                   '{"type":"session.closed","event_id":"e","reason":"bored","session":{},"usage":{}}'])
def test_a_bad_frame_is_one_line_error(frame: str) -> None:
    with pytest.raises(RemoteProtocolError) as exc:
        lv.parse_live_server(frame)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 200
