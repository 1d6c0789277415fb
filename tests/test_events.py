"""Wire events: every client and server event against the official SDK (tests/support/oracle.py)."""

from __future__ import annotations

import base64
import binascii
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import voxline.realtime.events as ev
from voxline.realtime.errors import LocalProtocolError, RemoteProtocolError
from tests.support.oracle import CLIENT_TYPES, SERVER_TYPES, check_client_event, check_server_event

CLIENT_SAMPLES: list[ev.ClientEvent] = [
    ev.SessionUpdate(
        event_id="c1",
        session=ev.SessionConfig(type="realtime", instructions="Be brief.", output_modalities=["audio"],
                                 audio={"input": {"turn_detection": None}, "output": {"voice": "marin"}}),
    ),
    ev.InputAudioBufferAppend(event_id="c2", audio=base64.b64encode(b"\x00\x01" * 240).decode()),
    ev.InputAudioBufferCommit(event_id="c3"),
    ev.InputAudioBufferClear(),
    ev.ConversationItemCreate(
        event_id="c5",
        item=ev.MessageItem(role="user", content=[ev.ContentPart(type="input_text", text="hi")]),
        previous_item_id=None,
    ),
    ev.ConversationItemCreate(item=ev.MessageItem.model_validate(
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "x"}]})),
    ev.ConversationItemCreate(item=ev.function_call_output("call_1", {"temp_c": 21})),
    ev.ConversationItemCreate(item=ev.FunctionCallItem(call_id="call_2", name="f", arguments="{}")),
    ev.ConversationItemRetrieve(item_id="item_a"),
    ev.ConversationItemTruncate(event_id="c9", item_id="item_a", content_index=0, audio_end_ms=1234),
    ev.ConversationItemDelete(item_id="item_a"),
    ev.ResponseCreate(),
    ev.ResponseCreate(
        response=ev.ResponseCreateParams(instructions="Say hi.", output_modalities=["text"], conversation="none")
    ),
    ev.ResponseCancel(),
    ev.ResponseCancel(response_id="resp_1"),
    ev.OutputAudioBufferClear(event_id="c15"),
]


def _single_line_error(exc: pytest.ExceptionInfo[RemoteProtocolError]) -> str:
    message = str(exc.value)
    assert "\n" not in message and len(message) < 200, message
    return message


# ---------------------------------------------------------------------------- client events


def test_vocabularies_match_the_sdk() -> None:
    assert ev.CLIENT_EVENT_TYPES == CLIENT_TYPES and len(ev.CLIENT_EVENT_TYPES) == 11
    assert ev.SERVER_EVENT_TYPES == SERVER_TYPES and len(ev.SERVER_EVENT_TYPES) == 46
    assert {type(sample).model_fields["type"].default for sample in CLIENT_SAMPLES} == CLIENT_TYPES


@pytest.mark.parametrize("event", CLIENT_SAMPLES, ids=lambda e: e.type)
def test_client_event_round_trip(event: ev.ClientEvent) -> None:
    wire = ev.encode_client_event(event)
    check_client_event(wire)  # valid per the SDK, no unknown keys
    assert wire == json.dumps(json.loads(wire), separators=(",", ":"), ensure_ascii=False)  # compact
    assert wire.startswith('{"type":')
    assert ev.parse_client_event(wire) == event
    assert json.loads(wire) == ev.client_event_dict(event)
    assert ev.parse_client_dict(json.loads(wire)) == event


def test_encode_keeps_explicit_none_and_drops_unset_none() -> None:
    create = ev.ConversationItemCreate(item=ev.MessageItem(role="user"), previous_item_id=None)
    with_none = json.loads(ev.encode_client_event(create))
    assert with_none["previous_item_id"] is None and "event_id" not in with_none
    assert "id" not in with_none["item"] and with_none["item"]["type"] == "message"
    assert ev.encode_client_event(ev.ResponseCancel()) == '{"type":"response.cancel"}'
    commit = ev.encode_client_event(ev.InputAudioBufferCommit(event_id="e1"))
    assert commit == '{"type":"input_audio_buffer.commit","event_id":"e1"}'
    session = {"type": "realtime", "tools": [], "audio": {"input": {"turn_detection": None}}}
    update = ev.parse_client_dict({"type": "session.update", "session": session})
    assert json.loads(ev.encode_client_event(update))["session"] == session  # a null that clears is kept
    cleared = ev.SessionUpdate(session=ev.SessionConfig(type="realtime", instructions=None))
    assert json.loads(ev.encode_client_event(cleared))["session"] == {"type": "realtime", "instructions": None}


def test_encode_rejects_non_client_events() -> None:
    with pytest.raises(LocalProtocolError):
        ev.encode_client_event(ev.ErrorEvent(error=ev.ErrorDetail(type="x", message="m")))  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="not a GA client event type"):
        ev.parse_client_dict({"type": "transcription_session.update"})
    with pytest.raises(LocalProtocolError, match="field 'audio_end_ms' expected int"):
        ev.parse_client_dict({"type": "conversation.item.truncate", "item_id": "i", "audio_end_ms": "soon"})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"type":"transcription_session.update","session":{}}', "beta"),
        ('{"type":"session.create"}', "unknown client event type 'session.create'"),
        ('{"type":"conversation.item.truncate","item_id":"i","audio_end_ms":[1]}', "field 'audio_end_ms' expected int"),
        ('{"type":"conversation.item.create"}', "field 'item' is missing"),
        ("[]", "expected a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_parse_client_event_failures(text: str, needle: str) -> None:
    with pytest.raises(RemoteProtocolError) as exc:
        ev.parse_client_event(text)
    assert needle in _single_line_error(exc)


# ---------------------------------------------------------------------------- tool payloads


def test_function_call_output_never_double_encodes() -> None:
    value = {"temp_c": 21, "sky": "clear", "nested": ["a", {"b": None}]}
    item = ev.function_call_output("call_1", value)
    wire = json.loads(ev.encode_client_event(ev.ConversationItemCreate(item=item)))
    assert json.loads(wire["item"]["output"]) == value  # exactly one level of encoding
    already_json = '{"temp_c": 21}'
    assert ev.function_call_output("c", already_json).output == already_json  # str sent as is
    assert ev.function_call_output("c", "sunny").output == "sunny"
    assert ev.function_call_output("c", [1, 2]).output == "[1,2]"
    assert ev.function_call_output("c", None).output == "null"
    assert ev.function_call_output("c", ev.RateLimit(name="tokens")).output == '{"name":"tokens"}'
    with pytest.raises(LocalProtocolError, match="not JSON-serialisable"):
        ev.function_call_output("c", b"raw")
    with pytest.raises(LocalProtocolError):
        ev.function_call_output("c", float("nan"))


def test_arguments_stay_raw_and_decode_once() -> None:
    raw = '{"city":"Paris","opts":"{\\"x\\":1}"}'
    item = ev.FunctionCallItem(call_id="call_1", name="f", arguments=raw)
    assert item.arguments == raw
    assert item.parsed_arguments() == {"city": "Paris", "opts": '{"x":1}'}  # inner string untouched
    assert ev.FunctionCallItem(name="f", arguments="").parsed_arguments() == {}
    done = ev.parse_server_event(json.dumps(ev.server_event_sample("response.function_call_arguments.done")))
    assert isinstance(done, ev.ResponseFunctionCallArgumentsDone)
    assert done.parsed_arguments() == {"city": "Paris"}
    secret = '{"key": "sk-abcdefghijklmnop", oops}'
    with pytest.raises(RemoteProtocolError) as exc:
        ev.FunctionCallItem(call_id="call_9", name="g", arguments=secret).parsed_arguments()
    message = _single_line_error(exc)
    assert "call_9" in message and "sk-" not in message and "oops" not in message


# ---------------------------------------------------------------------------- server events


@pytest.mark.parametrize("event_type", sorted(SERVER_TYPES))
def test_every_server_event_parses(event_type: str) -> None:
    sample = ev.server_event_sample(event_type)
    check_server_event(sample)  # the example itself is valid per the SDK
    event = ev.parse_server_event(json.dumps(sample))
    assert type(event) is ev.SERVER_EVENT_CLASSES[event_type]
    assert event.type == event_type
    assert type(event).beta is (event_type == "conversation.item.created")
    assert json.loads(ev.encode_server_event(event)) == sample  # nothing lost, nothing added
    assert ev.parse_server_event(json.dumps(sample).encode()) == event  # bytes frames too


def test_readable_class_names() -> None:
    names = {cls.__name__ for cls in ev.SERVER_EVENT_CLASSES.values()}
    expected = {"SessionCreated", "ResponseOutputAudioDelta", "InputAudioBufferSpeechStarted", "ConversationItemAdded",
                "ErrorEvent", "ResponseDone", "OutputAudioBufferCleared", "ConversationItemCreated"}
    assert expected <= names and len(names) == 46
    assert all(not name.endswith("EventEvent") for name in names)


def test_nested_models_are_typed() -> None:
    done = ev.parse_server_event(json.dumps(ev.server_event_sample("response.done")))
    assert isinstance(done, ev.ResponseDone)
    message, call = done.response.output or []
    assert isinstance(message, ev.MessageItem) and message.content[0].transcript == "Hi there."
    assert isinstance(call, ev.FunctionCallItem) and call.parsed_arguments() == {"city": "Paris"}
    assert done.response.usage is not None and done.response.usage.total_tokens == 30
    error = ev.parse_server_event(json.dumps(ev.server_event_sample("error")))
    assert isinstance(error, ev.ErrorEvent) and error.error.code == "response_cancel_not_active"
    assert error.error.event_id == "evt_c_1"


def test_unknown_items_and_fields_are_kept() -> None:
    sample = ev.server_event_sample("response.output_item.done")
    sample["item"] = {"type": "mcp_call", "id": "item_m", "server_label": "docs", "name": "search", "arguments": "{}"}
    sample["future_field"] = {"x": 1}
    event = ev.parse_server_event(json.dumps(sample))
    assert isinstance(event, ev.ResponseOutputItemDone)
    assert isinstance(event.item, ev.UnknownItem) and event.item.model_extra == {
        "id": "item_m", "server_label": "docs", "name": "search", "arguments": "{}"}
    assert event.model_extra == {"future_field": {"x": 1}}
    assert json.loads(ev.encode_server_event(event)) == sample
    updated = {"type": "session.updated", "session": {"type": "realtime", "tracing": "auto"}}
    session = ev.parse_server_event(json.dumps(updated))
    assert isinstance(session, ev.SessionUpdated) and session.session.model_extra == {"tracing": "auto"}


def test_unknown_type_is_returned_whole() -> None:
    raw = {"type": "response.hologram.delta", "event_id": "e9", "payload": [1, {"a": None}]}
    event = ev.parse_server_event(json.dumps(raw))
    assert isinstance(event, ev.UnknownServerEvent)
    assert event.raw == raw and event.type == "response.hologram.delta" and event.event_id == "e9"
    assert json.loads(ev.encode_server_event(event)) == raw


@pytest.mark.parametrize("beta_type", sorted(ev.BETA_SERVER_EVENT_TYPES))
def test_beta_names_are_reported(beta_type: str) -> None:
    raw = {"type": beta_type, "event_id": "e1", "delta": "AAAA"}
    event = ev.parse_server_event(json.dumps(raw))
    assert isinstance(event, ev.BetaServerEvent) and event.raw == raw
    assert event.ga_type == ev.BETA_SERVER_EVENT_TYPES[beta_type] and event.ga_type in ev.SERVER_EVENT_TYPES


def test_audio_delta_decodes_once_in_any_field_order() -> None:
    pcm = bytes(range(256)) * 4
    fields = list(ev.server_event_sample("response.output_audio.delta", "e_7").items())
    fields = [(k, base64.b64encode(pcm).decode() if k == "delta" else v) for k, v in fields]
    random.Random(3).shuffle(fields)
    event = ev.parse_server_event(json.dumps(dict(fields)))
    assert isinstance(event, ev.ResponseOutputAudioDelta)
    assert event.audio == pcm and event.audio is event.audio  # cached
    assert event.delta == base64.b64encode(pcm).decode()  # still the wire text
    assert "audio" not in event.model_dump()
    assert event == ev.parse_server_event(json.dumps(dict(fields)))
    other = event.model_copy(update={"delta": "AAEC"})
    assert other.audio == b"\x00\x01\x02" and event.audio == pcm  # the cache follows ``delta``
    event.delta = "AwQF"
    assert event.audio == b"\x03\x04\x05"


@pytest.mark.parametrize("delta", ["!!!!", "AAA", "AA=A", "AAAA\n", "AA AA", "AAAé"])
def test_invalid_base64_is_a_protocol_error(delta: str) -> None:
    sample = ev.server_event_sample("response.output_audio.delta")
    sample["delta"] = delta
    event = ev.parse_server_event(json.dumps(sample))
    assert isinstance(event, ev.ResponseOutputAudioDelta)
    with pytest.raises(RemoteProtocolError) as exc:
        _ = event.audio
    assert "not valid base64" in _single_line_error(exc)


def _with(event_type: str, **changes: object) -> str:
    sample = ev.server_event_sample(event_type)
    sample.update(changes)
    return json.dumps(sample)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "malformed server event: not valid JSON at line 1 column 2"),
        (b"\xff\xfe", "malformed server event: not valid JSON"),
        ("[1, 2]", "malformed server event: expected a JSON object, got list"),
        ('"session.created"', "malformed server event: expected a JSON object, got str"),
        ("null", "malformed server event: expected a JSON object, got NoneType"),
        ('{"event_id": "e1"}', "malformed server event: has no 'type'"),
        ('{"type": 7}', "malformed server event: has a 'type' that is not a string"),
        (_with("response.output_audio.delta", output_index="sk-secret-0001"),
         "malformed server event 'response.output_audio.delta': field 'output_index' expected int"),
        (_with("conversation.item.deleted", item_id=5),
         "malformed server event 'conversation.item.deleted': field 'item_id' expected str"),
        (_with("rate_limits.updated", rate_limits={"a": 1}), "field 'rate_limits' expected list"),
        (_with("error", error={"type": "x"}), "malformed server event 'error': field 'error.message' is missing"),
        (_with("response.done", response={"id": "r", "output": [{"type": "message", "role": 1}]}),
         "field 'response.output[0].role' expected str"),
        (_with("response.done", response={"id": "r", "output": [{"type": "function_call", "name": "f", "arguments": 1}]}),
         "field 'response.output[0].arguments' expected str"),
        ('{"type": "response.output_audio.delta"}', "field 'response_id' is missing (+4 more)"),
        (_with("response.done", response={"id": "r", "usage": {"total_tokens": 1e400}}),
         "field 'response.usage.total_tokens' expected a finite number"),
        (_with("conversation.item.added", item={"type": "function_call_output", "call_id": "c", "output": "x"},
               previous_item_id=3), "field 'previous_item_id' expected str"),
    ],
)
def test_malformed_frames_raise_one_line(text: str | bytes, expected: str) -> None:
    with pytest.raises(RemoteProtocolError) as exc:
        ev.parse_server_event(text)
    message = _single_line_error(exc)
    assert expected in message
    assert "sk-secret" not in message and "Input should" not in message


# ---------------------------------------------------------------------------- properties

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_known_fields = sorted({name for cls in ev.SERVER_EVENT_CLASSES.values() for name in cls.model_fields})
_types = st.text(max_size=40) | st.sampled_from(sorted(SERVER_TYPES | set(ev.BETA_SERVER_EVENT_TYPES)))


@settings(max_examples=400, deadline=None)
@given(kind=_types, fields=st.dictionaries(st.sampled_from(_known_fields) | st.text(max_size=6), _json, max_size=6))
def test_any_object_with_a_string_type_parses_or_raises_protocol_error(kind: str, fields: dict[str, object]) -> None:
    raw = {**fields, "type": kind}
    try:
        event = ev.parse_server_event(json.dumps(raw))
    except RemoteProtocolError as exc:
        assert kind in SERVER_TYPES and "\n" not in str(exc)
        return
    if kind in SERVER_TYPES:
        assert type(event) is ev.SERVER_EVENT_CLASSES[kind]
    elif kind in ev.BETA_SERVER_EVENT_TYPES:
        assert isinstance(event, ev.BetaServerEvent) and event.raw == raw
    else:
        assert isinstance(event, ev.UnknownServerEvent) and event.raw == raw


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.binary(max_size=60))
def test_arbitrary_frames_raise_nothing_but_protocol_errors(text: str | bytes) -> None:
    try:
        ev.parse_server_event(text)
    except RemoteProtocolError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()) | st.text("AQab+/= \n", max_size=16))
def test_audio_decoder_matches_strict_stdlib(text: str) -> None:
    try:
        expected: bytes | None = binascii.a2b_base64(text, strict_mode=True)
    except ValueError:
        expected = None
    try:
        got: bytes | None = ev.decode_audio(text)
    except RemoteProtocolError:
        got = None
    assert got == expected


_HALF_AN_EMOJI = ('{"type":"response.output_audio_transcript.delta","event_id":"e1","response_id":"r1","item_id":"i1",'
                  '"output_index":0,"content_index":0,"delta":"caf\\ud83d"}')


@pytest.mark.parametrize("frame", [_HALF_AN_EMOJI, _HALF_AN_EMOJI.encode()], ids=["text", "bytes"])
def test_half_a_character_in_a_server_frame_is_replaced_not_the_frame_lost(frame: str | bytes) -> None:
    """A peer that splits an emoji between two deltas escapes half of it alone: the frame is kept, the half is U+FFFD
    (a string holding it could never be logged as UTF-8 or sent back after a reconnect)."""
    event = ev.parse_server_event(frame)
    assert isinstance(event, ev.ResponseOutputAudioTranscriptDelta) and event.delta == "caf\ufffd"
    event.delta.encode("utf-8")
    unknown = ev.parse_server_event('{"type":"vendor.note","text":"\\udc00x","\\ud800":1}')
    assert isinstance(unknown, ev.UnknownServerEvent) and unknown.raw == {"type": "vendor.note", "text": "\ufffdx",
                                                                          "\ufffd": 1}
    whole = ev.parse_server_event(_HALF_AN_EMOJI.replace("\\ud83d", "\\ud83d\\ude00"))  # a pair is one character
    assert isinstance(whole, ev.ResponseOutputAudioTranscriptDelta) and whole.delta == "caf\U0001F600"
    with pytest.raises(RemoteProtocolError, match="field 'response_id' is missing"):  # still checked as any frame
        ev.parse_server_event(_HALF_AN_EMOJI.replace('"response_id":"r1",', ""))
