"""voxline's own client against the local server over a real loopback socket.

Every frame in both directions is validated by the oracle (the official SDK's types).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve

from voxline.audio.synth import synthesize
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.notices import MalformedServerEvent
from voxline.realtime.errors import ConnectionClosed, ConnectionFailed
from voxline.realtime.lifecycle import ResponseStatus
from voxline.realtime.notices import CommandFailed, ResponseStatusChanged
from voxline.realtime.server import ServerConfig, serve
from tests.support.ci import require_tool
from tests.support.oracle import WireRecorder

RATE = 24_000


@asynccontextmanager
async def client(recorder: WireRecorder, **overrides: Any) -> AsyncIterator[RealtimeConnection]:
    settings: dict[str, Any] = {"port": 0, "voice": "tone", "speed": float("inf")}
    async with serve(ServerConfig(**{**settings, **overrides})) as server:
        conn = await connect(server.url, "sk-test", on_wire=recorder)
        try:
            yield conn
        finally:
            await conn.close()
    recorder.verify()


async def until(conn: RealtimeConnection, kind: type, pred: Any = lambda e: True) -> list[Any]:
    seen = []
    async with asyncio.timeout(15):
        while True:
            event = await conn.recv()
            seen.append(event)
            if isinstance(event, kind) and pred(event):
                return seen


async def test_voice_turn_truncate_and_errors_over_loopback() -> None:
    require_tool("espeak-ng")
    rec = WireRecorder()
    speech = synthesize("Could you tell me a long story, please?", "espeak")
    signal = np.concatenate([np.zeros(RATE // 2, np.int16), speech, np.zeros(RATE, np.int16)])
    async with client(rec, scenario="long", voice="espeak", speed=8.0) as conn:
        conn.protocol.update_session({"type": "realtime", "output_modalities": ["audio"]})
        await conn.flush()
        await until(conn, ev.SessionUpdated)
        for i in range(0, len(signal), RATE // 10):
            conn.protocol.append_audio(signal[i : i + RATE // 10].tobytes())
        await conn.flush()
        seen = await until(conn, ev.ResponseOutputAudioDelta)
        assert any(isinstance(e, ev.InputAudioBufferSpeechStarted) for e in seen)
        assert any(isinstance(e, ev.InputAudioBufferSpeechStopped) for e in seen)
        delta = seen[-1]
        assert len(delta.audio) > 0
        await until(conn, ev.ResponseOutputAudioDelta)  # a little more audio arrives
        # cut the item at 150 ms: the core never asks for more than it received
        conn.protocol.truncate(delta.item_id, 150)
        await conn.flush()
        truncated = (await until(conn, ev.ConversationItemTruncated))[-1]
        assert truncated.audio_end_ms == 150
        # cancel the response; late deltas of it never reach us
        assert conn.protocol.cancel_response()
        await conn.flush()
        seen = await until(conn, ResponseStatusChanged, lambda e: e.status is ResponseStatus.CANCELLED)
        # errors map back to their commands and leave the session usable
        conn.protocol.clear_audio()
        conn.protocol.commit_audio()  # now empty
        conn.protocol.truncate("item_unknown", 10)
        conn.protocol.cancel_response()  # nothing active: not even sent
        await conn.flush()
        failures = [e for e in await until(conn, CommandFailed, lambda e: e.command_type == "conversation.item.truncate")
                    if isinstance(e, CommandFailed)]
        codes = {f.code for f in failures}
        assert "input_audio_buffer_commit_empty" in codes and "item_truncate_invalid_item_id" in codes
        assert sum(json.loads(t)["type"] == "response.cancel" for d, t in rec.frames if d == "out") == 1


async def test_truncate_past_the_audio_is_recovered_at_the_servers_length() -> None:
    rec = WireRecorder()
    async with client(rec, scenario="long", speed=float("inf")) as conn:
        conn.protocol.create_item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]})
        conn.protocol.create_response()
        await conn.flush()
        seen = await until(conn, ev.ResponseDone)
        item = next(e for e in seen if isinstance(e, ev.ResponseOutputAudioDone)).item_id
        received = conn.protocol.received_audio_ms(item)
        # pretend we lost count: ask for more than the server has, bypassing the clamp
        await conn.send_raw(json.dumps({"type": "conversation.item.truncate", "event_id": "manual_1", "item_id": item,
                                        "content_index": 0, "audio_end_ms": int(received) + 500}))
        seen = await until(conn, ev.ErrorEvent)
        assert "already shorter than" in seen[-1].error.message


async def test_a_second_create_waits_for_the_first_response() -> None:
    rec = WireRecorder()
    async with client(rec, speed=50.0) as conn:
        conn.protocol.create_item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]})
        conn.protocol.create_response()
        conn.protocol.create_response()
        await conn.flush()
        done = 0
        async with asyncio.timeout(20):
            while done < 2:
                event = await conn.recv()
                assert not (isinstance(event, CommandFailed) and event.code == "conversation_already_has_active_response")
                done += isinstance(event, ev.ResponseDone)


async def _garbage_server(connection: ServerConnection) -> None:
    await connection.send("{oops")
    await connection.send(json.dumps({"type": "brand.new.thing", "event_id": "e1", "x": 1}))
    await connection.send(json.dumps({"type": "response.output_audio.delta", "event_id": "e2", "response_id": "r",
                                      "item_id": "i", "output_index": 0, "content_index": 0, "delta": "!!notbase64"}))
    await connection.send(json.dumps({"type": "session.created", "event_id": "e3",
                                      "session": {"type": "realtime", "model": "gpt-realtime"}}))
    await connection.close(1011, "going away")


async def test_malformed_frames_from_a_peer_are_reported_and_the_close_code_kept() -> None:
    async with ws_serve(_garbage_server, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        conn = await connect(f"ws://127.0.0.1:{port}/v1", "sk-test")
        got = [event async for event in conn]
    kinds = [type(e).__name__ for e in got]
    assert kinds[0] == "MalformedServerEvent" and "UnknownServerEvent" in kinds and "SessionCreated" in kinds
    # an audio delta that is not base64 is reported as malformed, never handed on
    assert not [e for e in got if isinstance(e, ev.ResponseOutputAudioDelta)]
    assert any(isinstance(e, MalformedServerEvent) and "base64" in e.reason for e in got)
    assert conn.close_code == 1011 and conn.close_reason == "going away"
    with pytest.raises(ConnectionClosed):
        await conn.recv()


async def test_a_refused_token_and_a_dead_port_are_one_line_errors() -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key="sk-right")) as server:
        with pytest.raises(ConnectionFailed, match="HTTP 401") as info:
            await connect(server.url, "sk-wrong-secret")
        assert "sk-wrong" not in str(info.value) and "\n" not in str(info.value)
        port = server.port
    with pytest.raises(ConnectionFailed, match="cannot connect"):
        await connect(f"ws://127.0.0.1:{port}/v1", "sk-test", open_timeout=2)




async def test_the_handshake_tells_the_servers_clock_whatever_the_local_one_says() -> None:
    """``expires_at`` is read on this clock, so a skewed local clock does not move the hand-over."""
    async with serve(ServerConfig(port=0, voice="tone", api_key="sk-clock")) as srv:
        conn = await connect(srv.url, "sk-clock")
        try:
            server_time = conn.transport.server_time  # type: ignore[attr-defined]
            assert isinstance(await conn.recv(), ev.SessionCreated)
            expires_at = (conn.protocol.session or {}).get("expires_at")
            assert isinstance(server_time, float) and isinstance(expires_at, int)
            assert 0 < expires_at - server_time <= 3600 + 1  # the session's life, on the server's clock
        finally:
            await conn.close()
