"""Explicit ``null`` in optional fields is "not given" (docs/protocol.md §12), as real clients send it.

LiveKit Agents builds its events from the SDK's pydantic models and serialises them with
``model_dump(by_alias=True, exclude_unset=True, exclude_defaults=False)``, so a field it set
to ``None`` goes on the wire as ``null``: every reply is ``"response": {"instructions": null,
"metadata": {...}}``. The frames here are built the same way from the installed SDK, then sent
over a real socket to the local server; every frame in both directions goes through the oracle.
"""

from __future__ import annotations

import json
from typing import Any

import websockets
from openai.types.realtime import (
    AudioTranscription,
    ConversationItemCreateEvent,
    RealtimeAudioConfig,
    RealtimeAudioConfigInput,
    RealtimeAudioConfigOutput,
    RealtimeConversationItemUserMessage,
    RealtimeResponseCreateParams,
    RealtimeSessionCreateRequest,
    ResponseCreateEvent,
    SessionUpdateEvent,
)
from openai.types.realtime.realtime_audio_formats import AudioPCM
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad
from openai.types.realtime.realtime_conversation_item_user_message import Content

from voxline.realtime.server import serve
from tests.support.oracle import WireRecorder
from tests.support.engine_harness import Harness, error_of, only, types
from tests.support.local_server import AUTH, Client, config


def wire(event: Any) -> str:
    """The frame as LiveKit Agents' realtime plugin serialises an SDK event."""
    return json.dumps(event.model_dump(by_alias=True, exclude_unset=True, exclude_defaults=False))


def livekit_session_update() -> str:
    pcm = AudioPCM(rate=24000, type="audio/pcm")
    session = RealtimeSessionCreateRequest(
        type="realtime",
        model="gpt-realtime-2.1",
        output_modalities=["audio"],
        audio=RealtimeAudioConfig(
            input=RealtimeAudioConfigInput(
                format=pcm,
                noise_reduction=None,
                transcription=AudioTranscription(model="gpt-transcribe"),
                turn_detection=SemanticVad(
                    type="semantic_vad", create_response=True, eagerness="medium", interrupt_response=True
                ),
            ),
            output=RealtimeAudioConfigOutput(format=pcm, speed=1.0, voice="marin"),
        ),
        max_output_tokens="inf",
        tool_choice="auto",
        tracing=None,
    )
    return wire(SessionUpdateEvent(type="session.update", session=session, event_id="session_update_1"))


def livekit_reply(event_id: str) -> str:
    params = RealtimeResponseCreateParams(instructions=None, metadata={"client_event_id": event_id})
    return wire(ResponseCreateEvent(type="response.create", event_id=event_id, response=params))


def livekit_user_item() -> str:
    item = RealtimeConversationItemUserMessage(
        type="message", role="user", content=[Content(type="input_text", text="What is the weather?")]
    )
    item.id = "item_lk_1"
    event = ConversationItemCreateEvent(
        type="conversation.item.create", item=item, previous_item_id="root", event_id="chat_ctx_create_1"
    )
    return wire(event)


def test_the_frames_carry_null_as_livekit_sends_them() -> None:
    assert json.loads(livekit_reply("response_create_1"))["response"] == {
        "instructions": None,
        "metadata": {"client_event_id": "response_create_1"},
    }
    session = json.loads(livekit_session_update())["session"]
    assert session["tracing"] is None and session["audio"]["input"]["noise_reduction"] is None


async def test_a_livekit_conversation_gets_replies_not_invalid_type() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder)) as server:
        url = f"{server.url}/realtime?model=gpt-realtime-2.1"
        async with websockets.connect(url, additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            await c.send(livekit_session_update())
            updated = (await c.until("session.updated"))[-1]["session"]
            assert updated["audio"]["input"]["turn_detection"]["type"] == "semantic_vad"
            assert updated["audio"]["input"]["noise_reduction"] is None
            assert updated["audio"]["input"]["transcription"]["model"] == "gpt-transcribe"
            await c.send(livekit_user_item())
            added = await c.until("conversation.item.done")
            assert not only(added, "error") and added[-1]["item"]["id"] == "item_lk_1"
            for n in (1, 2):
                await c.send(livekit_reply(f"response_create_{n}"))
                events = await c.until("response.done")
                assert not only(events, "error"), only(events, "error")
                created = only(events, "response.created")[0]["response"]
                assert created["metadata"] == {"client_event_id": f"response_create_{n}"}
                assert events[-1]["response"]["status"] == "completed"
    recorder.verify()


def update(h: Harness, **session: Any) -> list[dict[str, Any]]:
    return h.send({"type": "session.update", "session": {"type": "realtime", **session}})


def test_null_leaves_optional_session_fields_unchanged() -> None:
    h = Harness()
    update(h, instructions="Be brief.", tools=[{"type": "function", "name": "f"}], max_output_tokens=100)
    nulls = dict.fromkeys(("instructions", "tools", "tool_choice", "max_output_tokens", "model", "truncation"))
    nulls.update(output_modalities=None, audio={"input": {"format": None}, "output": {"voice": None, "speed": None}})
    session = update(h, **nulls)[0]["session"]
    assert session["instructions"] == "Be brief." and session["max_output_tokens"] == 100
    assert [t["name"] for t in session["tools"]] == ["f"] and session["tool_choice"] == "auto"
    assert session["output_modalities"] == ["audio"] and session["audio"]["output"]["voice"] == "alloy"
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}


def test_null_keeps_its_meaning_where_it_has_one() -> None:
    h = Harness()
    update(h, audio={"input": {"transcription": {"model": "gpt-transcribe"}, "noise_reduction": {"type": "far_field"}}})
    session = update(h, audio={"input": {"turn_detection": None, "noise_reduction": None, "transcription": None}})
    audio_in = session[0]["session"]["audio"]["input"]
    assert audio_in["turn_detection"] is None and audio_in["noise_reduction"] is None
    assert audio_in["transcription"] is None


def test_null_fields_of_response_create_are_not_given() -> None:
    h = Harness()
    response = dict.fromkeys(
        ("instructions", "tools", "tool_choice", "max_output_tokens", "conversation", "output_modalities", "input")
    )
    events = h.send({"type": "response.create", "event_id": None, "response": {**response, "audio": None}})
    events += h.run()
    assert "error" not in types(events)
    done = only(events, "response.done")[0]["response"]
    assert done["status"] == "completed" and done["conversation_id"] is not None
    assert done["output_modalities"] == ["audio"]


def test_null_inside_items_is_not_given() -> None:
    h = Harness()
    item = {"id": None, "type": "message", "role": "user", "status": None,
            "content": [{"type": "input_text", "text": "hi"}]}
    events = h.send({"type": "conversation.item.create", "previous_item_id": None, "item": item})
    assert types(events) == ["conversation.item.added", "conversation.item.done"]
    assert events[0]["item"]["id"].startswith("item")
    reference = {"type": "response.create", "response": {"conversation": "none", "input": [
        {"type": "message", "role": "user", "id": None, "content": [{"type": "input_text", "text": "x"}]}]}}
    assert "error" not in types(h.send(reference) + h.run())


def test_null_is_still_refused_where_the_field_is_required() -> None:
    h = Harness()
    assert error_of(h.send({"type": "session.update", "session": {"type": None}}))["code"] == (
        "missing_required_parameter"
    )
    truncate = {"type": "conversation.item.truncate", "item_id": "x", "content_index": 0, "audio_end_ms": None}
    assert error_of(h.send(truncate))["param"] == "audio_end_ms"
