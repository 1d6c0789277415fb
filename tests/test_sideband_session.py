"""A kiosk holds a WebRTC call with an ephemeral key; a backend attaches by call id and runs the tools.

Both are VoiceSessions against the local server on loopback: the kiosk (``transport="webrtc"``,
``run_tools=False``) has the media; the backend (``call_id=…``, the API key) has none, and its
tool registry and conversation mirror work from the call's events. Every frame on the channel
and on the sideband goes through the oracle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.server import ServerConfig, serve
from voxline.session.cli.secret import mint_client_secret
from voxline.session.events import AssistantAudioStarted, ConnectionLost, RawServerEvent, SessionError, TranscriptDone
from voxline.session.machine import SessionMachine
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry, ToolStarted
from voxline.session.voice import VoiceSession
from tests.support.oracle import WireRecorder
from tests.support.session_events import until

KEY = "sk-backend-key"


def weather(log: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Current weather for a city."""
        log.append(city)
        return {"city": city, "temperature": 21, "unit": unit}

    return tools


async def test_the_backend_runs_the_kiosks_tools_over_the_sideband() -> None:
    kiosk_wire, backend_wire, server_wire = WireRecorder(), WireRecorder(), WireRecorder()

    def on_server_wire(direction: str, text: str) -> None:
        server_wire("out" if direction == "in" else "in", text)

    config = ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY, scenario="tools", on_wire=on_server_wire)
    ran: list[str] = []
    async with serve(config) as server:
        secret = await asyncio.to_thread(mint_client_secret, server.http_url, KEY, model="gpt-realtime-2.1", ttl=60)
        kiosk_settings = SessionSettings(url=server.http_url, api_key=secret["value"], transport="webrtc",
                                         turn_detection="server_vad", reconnect_attempts=0)
        async with VoiceSession(kiosk_settings, run_tools=False, on_wire=kiosk_wire) as kiosk:
            assert kiosk.call_id is not None and kiosk.call_id.startswith("rtc_")
            backend_settings = SessionSettings(url=server.url, api_key=KEY, call_id=kiosk.call_id,
                                               instructions="You run the kiosk's tools.", reconnect_attempts=0)
            async with VoiceSession(backend_settings, tools=weather(ran), on_wire=backend_wire) as backend:
                assert backend.call_id == kiosk.call_id
                await kiosk.send_text("What is the weather in Paris?")
                events = await until(backend, lambda e: isinstance(e, ToolFinished))
                started = [e for e in events if isinstance(e, ToolStarted)]
                assert [(e.name, e.arguments) for e in started] == [
                    ("get_weather", {"city": "Paris", "unit": "celsius"})]
                # The follow-up reply plays on the kiosk; the kiosk stops it and the server cuts its buffer.
                heard = await until(kiosk, lambda e: isinstance(e, TranscriptDone) and "weather report" in e.text)
                reply = heard[-1].item_id
                assert kiosk.track is not None
                async with asyncio.timeout(20):  # the server plays the reply on the track in real time
                    while kiosk.output.playout.ledger.heard_samples(reply, 0, kiosk.output.now()) == 0:
                        await asyncio.sleep(0.02)
                assert not any(isinstance(e, (ToolStarted, ToolFinished)) for e in heard)
                barge = await kiosk.interrupt()
                assert barge is not None and barge.server_cuts and barge.heard_ms > 0
                # The backend's mirror holds the call's conversation, the tool call and its output included.
                await until(backend, lambda e: isinstance(e, TranscriptDone) and "weather report" in e.text)
                kinds = [item.item_type for item in backend.mirror.items()]
                assert "function_call" in kinds and "function_call_output" in kinds
    assert ran == ["Paris"]
    kiosk_frames = [json.loads(t) for d, t in kiosk_wire.frames if d == "out"]
    assert not any(f["type"] == "conversation.item.create" and f["item"]["type"] == "function_call_output"
                   for f in kiosk_frames)
    backend_frames = [json.loads(t) for d, t in backend_wire.frames if d == "out"]
    assert backend_frames[0]["type"] == "session.update" and "audio" not in backend_frames[0]["session"]
    assert [t["name"] for t in backend_frames[0]["session"]["tools"]] == ["get_weather"]
    for wire in (kiosk_wire, backend_wire, server_wire):
        wire.verify()


async def test_the_backend_stops_the_reply_the_caller_hears() -> None:
    """A supervisor's interrupt on the sideband stops the call's audio: the server cancels and clears its output buffer
    and cuts the reply at what it played. Before, the sideband only cancelled, and the caller heard the buffered
    rest of the reply."""
    backend_wire = WireRecorder()

    def raw(kind: str) -> Callable[[object], bool]:
        return lambda e: isinstance(e, RawServerEvent) and e.event.type == kind

    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY, scenario="long")) as server:
        kiosk_settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=0)
        async with VoiceSession(kiosk_settings, run_tools=False, raw_events=True) as kiosk:
            backend_settings = SessionSettings(url=server.url, api_key=KEY, call_id=kiosk.call_id, reconnect_attempts=0)
            async with VoiceSession(backend_settings, on_wire=backend_wire, raw_events=True) as backend:
                await kiosk.send_text("Tell me a long story.")
                await until(backend, raw("output_audio_buffer.started"))  # the server plays the reply on the call
                await until(kiosk, lambda e: isinstance(e, AssistantAudioStarted))  # and the caller hears it
                barge = await backend.interrupt()
                assert barge is not None and barge.server_cuts
                await until(kiosk, raw("output_audio_buffer.cleared"))  # the caller's audio stops
                truncated = (await until(backend, raw("conversation.item.truncated")))[-1]
                assert isinstance(truncated, RawServerEvent) and truncated.event.audio_end_ms > 0  # at what was played
    backend_wire.verify()
    sent = [json.loads(t)["type"] for d, t in backend_wire.frames if d == "out"]
    assert "output_audio_buffer.clear" in sent and "conversation.item.truncate" not in sent


async def test_the_backend_session_ends_when_the_kiosk_hangs_up() -> None:
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        kiosk_settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=0)
        async with VoiceSession(kiosk_settings, run_tools=False) as kiosk:
            backend = VoiceSession(SessionSettings(url=server.url, api_key=KEY, call_id=kiosk.call_id,
                                                   reconnect_attempts=1))
            async with backend:
                await kiosk.aclose()
                events = await until(backend, lambda e: isinstance(e, ConnectionLost))
                assert events[-1].code == 1000
                rest: list[Any] = []
                async with asyncio.timeout(20):
                    async for event in backend:  # the call is gone: the reconnect is refused, the session ends
                        rest.append(event)
                assert any(getattr(e, "code", None) == "connection_lost" for e in rest)


async def test_a_sideband_whose_call_ended_gives_up_at_the_first_refusal() -> None:
    """Its call hung up, a sideband kept every reconnect try of its budget, each refused with 'no such call', before
    the session ended (seconds of backoff on the service): an app kept its backend's sideband from reconnecting at all
    (reconnect_attempts=0) rather than wait, and lost it to any network blip."""
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        kiosk_settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=0)
        async with VoiceSession(kiosk_settings, run_tools=False) as kiosk:
            backend = VoiceSession(SessionSettings(url=server.url, api_key=KEY, call_id=kiosk.call_id,
                                                   reconnect_attempts=5))
            async with backend:
                await kiosk.aclose()
                async with asyncio.timeout(20):
                    events = [event async for event in backend]
    errors = [e for e in events if isinstance(e, SessionError)]
    assert [e.code for e in errors] == ["reconnect_failed", "connection_lost"]
    assert errors[-1].fatal and errors[-1].message == ("the connection is lost and could not be restored: the call "
                                                       f"{kiosk.call_id} is no more (HTTP 404)")


def test_a_sideband_session_takes_no_input() -> None:
    async def nothing() -> Any:
        yield

    settings = SessionSettings(url="ws://127.0.0.1:9/v1", api_key="sk-x", call_id="rtc_1")
    with pytest.raises(ConfigurationError, match="no media of its own"):
        VoiceSession(settings, input=nothing())
    assert "audio" not in settings.session_config()


def test_push_to_talk_on_a_calls_sideband_is_refused_and_leaves_the_callers_input_alone() -> None:
    """A sideband has no microphone: its press cleared the call's input buffer (what the caller was saying) and its
    release cleared it again, with a 'turn of 0 ms is too short' error."""
    machine = SessionMachine(SessionSettings(api_key="k", call_id="rtc_1"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    protocol.data_to_send()  # its session.update
    with pytest.raises(ConfigurationError, match=r"^start_talking: a session attached to a call \(call_id\) has no "):
        machine.start_talking(1.0)
    with pytest.raises(ConfigurationError, match=r"^stop_talking: a session attached to a call"):
        machine.stop_talking(1.5)
    assert protocol.data_to_send() == []
