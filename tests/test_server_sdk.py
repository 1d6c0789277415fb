"""The local server through the official ``openai`` SDK (``client.realtime.connect``).

Speech input is made by espeak-ng (required in CI). Every frame the server sees or
sends is validated by the oracle.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from openai.types.realtime import ClientSecretCreateResponse

from voxline.audio.vad import EnergyVad, SpeechStart, SpeechStop
from voxline.audio.synth import synthesize
from voxline.realtime.server import ServerConfig, serve
from tests.support.ci import require_tool
from tests.support.oracle import WireRecorder

RATE = 24000


@asynccontextmanager
async def session(recorder: WireRecorder, **overrides: Any) -> AsyncIterator[tuple[Any, Any]]:
    """A server on port 0 and an SDK connection to it."""

    def on_wire(direction: str, text: str) -> None:
        recorder("out" if direction == "in" else "in", text)

    settings: dict[str, Any] = {"port": 0, "voice": "tone", "speed": float("inf"), "on_wire": on_wire}
    async with serve(ServerConfig(**{**settings, **overrides})) as server:
        client = AsyncOpenAI(api_key="sk-test", websocket_base_url=server.url)
        async with client.realtime.connect(model="gpt-realtime") as conn:
            yield server, conn


async def until(conn: Any, type_: str) -> list[Any]:
    events = []
    async with asyncio.timeout(15):
        async for event in conn:
            events.append(event)
            if event.type == type_:
                return events
    raise AssertionError(f"connection ended before {type_}")


async def raw(conn: Any, recorder: WireRecorder, event: dict[str, Any]) -> None:
    """Send a deliberately invalid event exactly as written."""
    text = json.dumps(event)
    recorder.expect_invalid(text)
    await conn.send_raw(text)


def utterance() -> np.ndarray:
    require_tool("espeak-ng")
    speech = synthesize("Could you tell me a long story, please?", "espeak")
    return np.concatenate([np.zeros(RATE // 2, np.int16), speech, np.zeros(RATE, np.int16)])


async def test_vad_turn_response_with_audio_cancel_and_truncate() -> None:
    recorder = WireRecorder()
    signal = utterance()
    start, stop = EnergyVad().process(signal)
    assert isinstance(start, SpeechStart) and isinstance(stop, SpeechStop)
    async with session(recorder, scenario="long", voice="espeak", speed=8.0) as (_, conn):
        vad = {"type": "server_vad", "silence_duration_ms": 500}  # as EnergyVad() above splits the signal
        await conn.session.update(session={"type": "realtime", "output_modalities": ["audio"],
                                           "audio": {"input": {"turn_detection": vad}}})
        await until(conn, "session.updated")
        for i in range(0, len(signal), RATE // 10):
            await conn.input_audio_buffer.append(audio=base64.b64encode(signal[i : i + RATE // 10].tobytes()).decode())
        events = await until(conn, "response.output_audio.delta")
        by_type = {e.type: e for e in events}
        assert by_type["input_audio_buffer.speech_started"].audio_start_ms == start.start * 1000 // RATE
        assert by_type["input_audio_buffer.speech_stopped"].audio_end_ms == stop.end * 1000 // RATE
        assert 150 <= by_type["input_audio_buffer.speech_started"].audio_start_ms <= 400
        assert by_type["input_audio_buffer.committed"].item_id == by_type["input_audio_buffer.speech_started"].item_id
        item_id = by_type["response.output_audio.delta"].item_id
        received = len(base64.b64decode(by_type["response.output_audio.delta"].delta))
        while received < 48 * 1000:
            event = (await until(conn, "response.output_audio.delta"))[-1]
            received += len(base64.b64decode(event.delta))
        await conn.response.cancel()
        tail = await until(conn, "response.done")
        received += sum(len(base64.b64decode(e.delta)) for e in tail if e.type == "response.output_audio.delta")
        assert tail[-1].response.status == "cancelled"
        assert tail[-1].response.status_details.reason == "client_cancelled"
        received_ms = received // 48
        await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=received_ms + 1)
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.param) == ("invalid_value", "audio_end_ms")
        assert error.message == f"Audio content of {received_ms}ms is already shorter than {received_ms + 1}ms"
        await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=500)
        truncated = (await until(conn, "conversation.item.truncated"))[-1]
        assert (truncated.item_id, truncated.audio_end_ms) == (item_id, 500)
        await conn.conversation.item.retrieve(item_id=item_id)
        item = (await until(conn, "conversation.item.retrieved"))[-1].item
        assert len(base64.b64decode(item.content[0].audio)) == 500 * 48 and item.content[0].transcript is None
    recorder.verify()


async def test_errors_of_protocol_sections_5_to_7() -> None:
    recorder = WireRecorder()
    async with session(recorder, speed=1.0) as (_, conn):
        await conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
        await until(conn, "session.updated")
        await conn.response.create()
        response_id = (await until(conn, "response.created"))[-1].response.id
        await conn.response.create(event_id="second")
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.event_id) == ("conversation_already_has_active_response", "second")
        assert response_id in error.message
        await conn.response.cancel()
        assert (await until(conn, "response.done"))[-1].response.status_details.reason == "client_cancelled"
        await conn.response.cancel(event_id="late")
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.message, error.event_id) == (
            "response_cancel_not_active",
            "Cancellation failed: no active response found",
            "late",
        )
        await conn.conversation.item.truncate(item_id="item_missing", content_index=0, audio_end_ms=10)
        assert (await until(conn, "error"))[-1].error.code == "item_truncate_invalid_item_id"
        user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        await conn.conversation.item.create(item=user)
        user_id = (await until(conn, "conversation.item.done"))[-1].item.id
        await conn.conversation.item.truncate(item_id=user_id, content_index=0, audio_end_ms=0)
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.message) == (
            "unsupported_content_type",
            "Only model output audio messages can be truncated",
        )
        await conn.input_audio_buffer.commit()
        error = (await until(conn, "error"))[-1].error
        assert error.code == "input_audio_buffer_commit_empty"
        assert error.message.endswith("but buffer only has 0.00ms of audio.")
        await raw(
            conn,
            recorder,
            {"type": "session.update", "event_id": "u1", "session": {"type": "realtime", "modalities": ["audio"]}},
        )
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.message, error.event_id) == (
            "unknown_parameter",
            "Unknown parameter: 'session.modalities'.",
            "u1",
        )
        await raw(conn, recorder, {"type": "session.update", "session": {"instructions": "x"}})
        error = (await until(conn, "error"))[-1].error
        assert (error.code, error.message) == (
            "missing_required_parameter",
            "Missing required parameter: 'session.type'.",
        )
        await conn.response.create()
        assert (await until(conn, "response.created"))[-1].type == "response.created"
    recorder.verify()


async def test_tool_calls_round_trip_through_the_sdk() -> None:
    recorder = WireRecorder()
    async with session(recorder, scenario="tools") as (_, conn):
        await conn.response.create()
        done = (await until(conn, "response.done"))[-1].response
        calls = [o for o in done.output if o.type == "function_call"]
        assert [c.name for c in calls] == ["get_weather"] and json.loads(calls[0].arguments) == {
            "city": "Paris",
            "unit": "celsius",
        }
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"sky":"clear"}'}
        )
        await until(conn, "conversation.item.done")
        await conn.response.create()
        reply = await until(conn, "response.done")
        transcripts = [e.transcript for e in reply if e.type == "response.output_audio_transcript.done"]
        assert transcripts == ["I have the weather report now. Thank you for waiting."]
    recorder.verify()


async def test_ephemeral_key_from_the_sdk_opens_a_configured_session() -> None:
    recorder = WireRecorder()
    async with session(recorder, api_key="sk-test") as (server, _):
        admin = AsyncOpenAI(api_key="sk-test", base_url=server.http_url)
        secret = await admin.realtime.client_secrets.create(session={"type": "realtime", "instructions": "Kiosk mode."})
        raw_response = await admin.realtime.client_secrets.with_raw_response.create(session={"type": "realtime"})
        ClientSecretCreateResponse.model_validate(json.loads(raw_response.http_response.text))
        kiosk = AsyncOpenAI(api_key=secret.value, websocket_base_url=server.url)
        async with kiosk.realtime.connect(model="gpt-realtime") as conn:
            created = await conn.recv()
            assert created.type == "session.created" and created.session.type == "realtime"
            assert created.session.instructions == "Kiosk mode."
    recorder.verify()


async def test_the_beta_client_is_refused_with_4000() -> None:
    recorder = WireRecorder()
    async with session(recorder) as (server, _):
        client = AsyncOpenAI(api_key="sk-test", websocket_base_url=server.url)
        async with client.beta.realtime.connect(model="gpt-realtime") as conn:
            first = json.loads(await conn.recv_bytes())
            assert first["error"]["code"] == "beta_api_shape_disabled"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await conn.recv_bytes()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000
    recorder.verify()


async def test_session_expiry_through_the_sdk() -> None:
    recorder = WireRecorder()
    async with session(recorder, max_session_s=0.2) as (_, conn):
        error = (await until(conn, "error"))[-1].error
        assert error.code == "session_expired"
        remaining = [e async for e in conn]  # the server closes with 1001 (going away): iteration ends
        assert remaining == []
    recorder.verify()
