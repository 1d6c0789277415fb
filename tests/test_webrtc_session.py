"""A VoiceSession over WebRTC: hangup from either side, and a reconnect onto a new call.

The server hangs a call up with ``POST /v1/realtime/calls/{id}/hangup`` (the official SDK's
``calls.hangup``); the session sees the call end, opens a new call, sends its configuration
again and rebuilds the conversation there. Closing the session ends the server's call.
Every data-channel frame goes through the oracle.
"""

from __future__ import annotations

import asyncio

import pytest
from openai import AsyncOpenAI

from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import ConnectionLost, ConnectionRestored, ResponseFinished, TranscriptDone
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.oracle import WireRecorder
from tests.support.session_events import until

KEY = "sk-webrtc-session"


@pytest.mark.slow
async def test_a_server_hangup_is_a_drop_the_session_recovers_from_on_a_new_call() -> None:
    wire = WireRecorder()
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=2,
                                   instructions="Be brief.")
        async with VoiceSession(settings, on_wire=wire,
                                backoff=lambda attempt: 0.0) as session, AsyncOpenAI(
                                    api_key=KEY, base_url=server.http_url) as client:
            await session.send_text("hello")
            await until(session, lambda e: isinstance(e, ResponseFinished))
            first_call = session.call_id
            assert first_call is not None and server._calls.active == [first_call]
            await client.realtime.calls.hangup(first_call)
            lost = await until(session, lambda e: isinstance(e, ConnectionLost))
            restored = await until(session, lambda e: isinstance(e, ConnectionRestored))
            assert lost[-1].code == 1006  # the peer connection ended: no close code on WebRTC
            assert restored[-1].replayed_items >= 2  # the user's text and the reply, rebuilt on the new call
            assert session.call_id not in (None, first_call) and server._calls.active == [session.call_id]
            await session.send_text("again")
            events = await until(session, lambda e: isinstance(e, TranscriptDone) and e.role == "assistant")
            assert events[-1].text
        async with asyncio.timeout(10):  # closing the session hangs up from the client side
            while server._calls.active:
                await asyncio.sleep(0.01)
    wire.verify()
    sent = [text for direction, text in wire.frames if direction == "out"]
    updates = [text for text in sent if '"session.update"' in text]
    assert len(updates) == 2 and all('"Be brief."' in text for text in updates)
