"""A VoiceSession over WebRTC: hangup from either side, and a reconnect onto a new call.

The server hangs a call up with ``POST /v1/realtime/calls/{id}/hangup`` (the official SDK's
``calls.hangup``); the session sees the call end, opens a new call, sends its configuration
again and rebuilds the conversation there. Closing the session ends the server's call.
Every data-channel frame goes through the oracle.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

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


@pytest.mark.slow
async def test_a_push_to_talk_turn_cut_by_a_hangup_is_sent_on_the_new_call_and_answered() -> None:
    """The user holds the key while the call drops and lets go while away: the new call's track cannot carry what
    was said, so the turn goes as user audio items on its data channel, then the one response."""
    import numpy as np

    from voxline.audio.recording import Recording
    from voxline.base.clock import RealClock
    from voxline.session.events import ConnectionRestored

    wire = WireRecorder()
    clock = RealClock()
    t = np.arange(24_000 * 30) / 24_000
    speech = (6000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16)
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", turn_detection="none",
                                   reconnect_attempts=2)
        async with VoiceSession(settings, input=Recording(speech, clock, clock.now()), clock=clock, on_wire=wire,
                                backoff=lambda attempt: 0.0) as session, AsyncOpenAI(
                                    api_key=KEY, base_url=server.http_url) as client:
            await session.start_talking()
            async with asyncio.timeout(20):  # the user talks on the call's track until half a second is kept
                while session.machine.mic.journal.sizes()["held"] < 12_000:
                    await asyncio.sleep(0.01)
            first_call = session.call_id
            assert first_call is not None
            await client.realtime.calls.hangup(first_call)
            await until(session, lambda e: isinstance(e, ConnectionLost))
            await session.stop_talking()  # let go while away: kept for the next call
            restored = (await until(session, lambda e: isinstance(e, ConnectionRestored)))[-1]
            assert restored.resent_creates == 1 and restored.resent_audio_ms >= 500
            await _answered_without_error(session)
    out, resent = _sent_and_resent(wire)
    assert resent and all(len(json.dumps(e)) <= 262_144 for e in resent)
    after = [e["type"] for e in out[out.index(resent[-1]):]]
    assert "response.create" in after


@pytest.mark.slow
async def test_speech_under_way_at_a_hangup_with_server_vad_is_sent_on_the_new_call_and_answered() -> None:
    """The server's VAD heard the user begin, then the call dropped: the new call's track carries only what follows,
    so what was said goes as user audio items on its data channel, and the turn is answered."""
    import numpy as np

    from voxline.audio.recording import Recording
    from voxline.base.clock import RealClock
    from voxline.session.events import SpeechStarted

    wire = WireRecorder()
    clock = RealClock()
    t = np.arange(24_000 * 2) / 24_000
    speech = np.concatenate([(6000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16), np.zeros(24_000 * 20, np.int16)])
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=2)
        async with VoiceSession(settings, input=Recording(speech, clock, clock.now()), clock=clock, on_wire=wire,
                                backoff=lambda attempt: 0.0) as session, AsyncOpenAI(
                                    api_key=KEY, base_url=server.http_url) as client:
            await until(session, lambda e: isinstance(e, SpeechStarted))
            first_call = session.call_id
            assert first_call is not None
            await client.realtime.calls.hangup(first_call)
            await until(session, lambda e: isinstance(e, ConnectionLost))
            restored = (await until(session, lambda e: isinstance(e, ConnectionRestored)))[-1]
            assert restored.resent_creates == 1 and restored.resent_audio_ms > 0
            await _answered_without_error(session)
    out, resent = _sent_and_resent(wire)
    said = np.concatenate([np.frombuffer(base64.b64decode(e["item"]["content"][0]["audio"]), "<i2") for e in resent])
    assert np.array_equal(said, speech[:len(said)])  # from its first sample: the speech began within the padding
    assert len(said) == round(restored.resent_audio_ms * 24)
    assert "response.create" in [e["type"] for e in out[out.index(resent[-1]):]]


async def _answered_without_error(session: VoiceSession) -> None:
    """The new call answers, having taken every item sent to it."""
    from voxline.session.events import SessionError

    seen = await until(session, lambda e: isinstance(e, ResponseFinished), timeout_s=20)
    assert not [e for e in seen if isinstance(e, SessionError)]


def _sent_and_resent(wire: WireRecorder) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every event the session sent (the wire checked by the oracle), and those that carried the user's audio as items."""
    wire.verify()
    out = [json.loads(text) for direction, text in wire.frames if direction == "out"]
    return out, [e for e in out if e["type"] == "conversation.item.create"
                 and e["item"]["content"][0]["type"] == "input_audio"]
