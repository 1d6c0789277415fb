"""Live over WebRTC on loopback: the SDK's ``live.create`` with a bare aiortc caller, a sideband, hang-up and fork.

The caller sends speech then silence on its microphone track in real time (the track is what
moves a WebRTC session's timeline). Every frame on the data channel and the sideband goes
through the Live oracle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack
from openai import AsyncOpenAI, BadRequestError

from voxline.realtime.server import serve
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.live.rtc import read_offer
from voxline.realtime.transports.rtc_audio import PacedAudioTrack, SampleQueue, pump_remote_audio
from tests.support.engine_harness import silence, speech
from tests.support.live_oracle import check_live_server_event
from tests.support.local_server import KEY, config
from tests.support.rtc_raw import send_raw_text

pytestmark = pytest.mark.slow  # real-time media


class Caller:
    """A bare WebRTC peer: a microphone track playing ``mic`` then silence, the data channel's events queued."""

    def __init__(self, mic: np.ndarray) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        queue = SampleQueue()
        queue.push(mic)
        self.pc.addTrack(PacedAudioTrack(queue.take))
        self.channel = self.pc.createDataChannel("oai-events")
        self.channel.on("message", lambda text: self.events.put_nowait(json.loads(text)))
        self.opened = asyncio.Event()
        self.channel.on("open", self.opened.set)
        self.heard: list[np.ndarray] = []
        self.pc.on("track", self._on_track)
        self._pump: asyncio.Task[None] | None = None

    def _on_track(self, track: MediaStreamTrack) -> None:
        self._pump = asyncio.ensure_future(pump_remote_audio(track, self.heard.append))

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return str(self.pc.localDescription.sdp)

    async def answer(self, sdp: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))
        async with asyncio.timeout(10):
            await self.opened.wait()

    async def until(self, kind: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
        async with asyncio.timeout(20):
            while True:
                event = await self.events.get()
                check_live_server_event(event, "primary")
                seen.append(event)
                if event["type"] == kind:
                    return event

    async def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
        await self.pc.close()


@asynccontextmanager
async def live(**overrides: Any) -> AsyncIterator[tuple[Any, AsyncOpenAI]]:
    async with serve(config(scenario="default", transcripts=("Hello.", "Again."), **overrides)) as server:
        client = AsyncOpenAI(api_key=KEY, base_url=server.http_url, websocket_base_url=server.url)
        try:
            yield server, client
        finally:
            await client.close()


async def test_a_webrtc_session_through_the_sdk_with_a_sideband_and_hangup() -> None:
    async with live() as (_, client):
        caller = Caller(np.concatenate([silence(0.2), speech(0.5)]))
        try:
            created = await client.live.create(session={"model": "gpt-live-1", "audio": {"output": {"voice": "cedar"}}},
                                               transport={"type": "webrtc", "sdp": await caller.offer()})
            assert created.transport.type == "webrtc" and created.session.id.startswith("sess_")
            await caller.answer(created.transport.sdp)
            seen: list[dict[str, Any]] = []
            started = await caller.until("session.started", seen)
            assert started["session"]["id"] == created.session.id and "format" not in started["session"]["audio"]
            async with client.live.sideband.connect(session_id=created.session.id) as side:
                snapshot = json.loads(await side.recv_bytes())
                check_live_server_event(snapshot, "sideband")
                assert snapshot["type"] == "session.started"
                heard = await caller.until("session.input_transcript.delta", seen)
                assert heard["delta"] == "Hello." and 150 <= heard["start_ms"] <= 260
                said = await caller.until("session.output_transcript.delta", seen)
                assert said["delta"] == "Hello!"
                observed: list[dict[str, Any]] = []
                async with asyncio.timeout(10):
                    while not any(e["type"] == "session.output_audio.delta" for e in observed):
                        observed.append(json.loads(await side.recv_bytes()))
                        check_live_server_event(observed[-1], "sideband")
                out = next(e for e in observed if e["type"] == "session.output_audio.delta")
                assert out["end_ms"] - out["start_ms"] == 100
                assert not any(e["type"] == "session.output_audio.delta" for e in seen)  # audio is on the track
                await client.live.sessions.hangup(created.session.id)
                closed = await caller.until("session.closed", seen)
                assert closed["reason"] == "close_requested"
                async with asyncio.timeout(10):  # the sideband hears it too, then the server closes it
                    async for event in side:
                        observed.append(event.to_dict())
                assert observed[-1]["type"] == "session.closed"
                assert any(np.abs(block).max() > 1000 for block in caller.heard)  # the reply was on the track
        finally:
            await caller.close()


@pytest.mark.parametrize(("body", "code", "param"), [
    ({}, "missing_required_parameter", "transport"),
    ({"transport": None}, "missing_required_parameter", "transport"),
    ({"transport": "webrtc"}, "invalid_type", "transport"),
    ({"transport": ["webrtc"]}, "invalid_type", "transport"),
    ({"transport": {"type": "webrtc"}}, "missing_required_parameter", "transport.sdp"),
    ({"transport": {"type": "webrtc", "sdp": ""}}, "missing_required_parameter", "transport.sdp"),
    ({"transport": {"type": "webrtc", "sdp": 5}}, "invalid_type", "transport.sdp"),
    ({"transport": {"type": "webrtc", "sdp": {"v": 0}}}, "invalid_type", "transport.sdp"),
])
def test_a_webrtc_request_names_a_missing_field_apart_from_one_of_the_wrong_type(body: dict[str, Any], code: str,
                                                                                  param: str) -> None:
    with pytest.raises(RequestRejected) as rejected:
        read_offer(json.dumps(body).encode())
    assert (rejected.value.spec.code, rejected.value.spec.param) == (code, param)


async def test_a_bad_offer_or_session_is_a_400_in_the_services_shape() -> None:
    async with live() as (_, client):
        with pytest.raises(BadRequestError) as bad_sdp:
            await client.live.create(session={"model": "gpt-live-1"}, transport={"type": "webrtc", "sdp": "hello"})
        assert bad_sdp.value.body["param"] == "transport.sdp"  # type: ignore[index]
        caller = Caller(silence(0.1))
        try:
            with pytest.raises(BadRequestError) as bad_session:
                await client.live.create(session={"model": "gpt-live-1", "audio": {"format": {"type": "audio/pcm", "rate": 24000}}},  # type: ignore[typeddict-unknown-key]
                                         transport={"type": "webrtc", "sdp": await caller.offer()})
            assert bad_session.value.body["code"] == "unknown_parameter"  # type: ignore[index]
            with pytest.raises(BadRequestError) as no_session:  # before: "expected an object", of what was not given
                await client.post("/live/sessions", cast_to=object,
                                  body={"transport": {"type": "webrtc", "sdp": await caller.offer()}})
            assert (no_session.value.body["code"], no_session.value.body["param"]) == (  # type: ignore[index]
                "missing_required_parameter", "session")
            with pytest.raises(BadRequestError) as bare_offer:  # before: read as JSON, "failed to parse JSON value"
                await client.post("/live/sessions", cast_to=object, content=(await caller.offer()).encode(),
                                  options={"headers": {"Content-Type": "application/sdp"}})
            assert bare_offer.value.body["code"] == "unsupported_content_type"  # type: ignore[index]
        finally:
            await caller.close()


async def test_a_stored_session_forks_over_webrtc() -> None:
    async with live() as (server, client):
        async with client.live.connect() as conn:
            await conn.session.start(session={"model": "gpt-live-1", "store": True, "instructions": "Be brief."})
            stored_id = (await conn.recv()).session.id  # type: ignore[union-attr]
            await conn.session.close()
            assert [e.type async for e in conn][-1] == "session.closed"
        caller = Caller(silence(0.1))
        try:
            forked = await client.live.sessions.fork(stored_id, session={"store": False},
                                                     transport={"type": "webrtc", "sdp": await caller.offer()})
            assert forked.session.id != stored_id
            await caller.answer(forked.transport.sdp)
            started = await caller.until("session.started", [])
            assert started["session"]["instructions"] == "Be brief." and started["session"]["store"] is False
        finally:
            await caller.close()


async def test_a_caller_who_hangs_up_ends_the_session_with_remote_hangup() -> None:
    async with live() as (_, client):
        caller = Caller(silence(0.1))
        created = await client.live.create(session={"model": "gpt-live-1"},
                                           transport={"type": "webrtc", "sdp": await caller.offer()})
        await caller.answer(created.transport.sdp)
        await caller.until("session.started", [])
        async with client.live.sideband.connect(session_id=created.session.id) as side:
            assert json.loads(await side.recv_bytes())["type"] == "session.started"
            await caller.close()  # the peer connection goes away cleanly
            observed: list[dict[str, Any]] = []
            async with asyncio.timeout(15):
                async for event in side:
                    observed.append(event.to_dict())
                    check_live_server_event(observed[-1], "sideband")
        assert observed[-1]["type"] == "session.closed" and observed[-1]["reason"] == "remote_hangup"


async def test_the_data_channel_is_held_to_the_sessions_permissions() -> None:
    async with live() as (_, client):
        caller = Caller(silence(0.1))
        try:
            permissions = {"allowed_client_events": ["session.input_audio.mute", "session.thinking.append"],
                           "allowed_server_events": [{"type": "session.started"}, {"type": "session.input_audio.muted"}]}
            created = await client.live.create(session={"model": "gpt-live-1", "client": {"data_channel": permissions}},
                                               transport={"type": "webrtc", "sdp": await caller.offer()})
            await caller.answer(created.transport.sdp)
            seen: list[dict[str, Any]] = []
            await caller.until("session.started", seen)
            caller.channel.send(json.dumps({"type": "session.commentary.append", "delegation_id": None, "content": "x"}))
            refused = await caller.until("error", seen)
            assert refused["error"]["code"] == "event_not_allowed"
            caller.channel.send(json.dumps({"type": "session.thinking.append", "delegation_id": None, "content": "y"}))
            caller.channel.send(json.dumps({"type": "session.input_audio.mute", "event_id": "m"}))
            await caller.until("session.input_audio.muted", seen)  # in order: thinking.appended would come first
            assert [e["type"] for e in seen] == ["session.started", "error", "session.input_audio.muted"]
        finally:
            await caller.close()


@asynccontextmanager
async def started_caller() -> AsyncIterator[tuple[Caller, list[dict[str, Any]]]]:
    """A caller whose WebRTC session started on a fresh local server, and the events it saw so far."""
    async with live() as (_, client):
        caller = Caller(silence(0.1))
        try:
            created = await client.live.create(session={"model": "gpt-live-1"},
                                               transport={"type": "webrtc", "sdp": await caller.offer()})
            await caller.answer(created.transport.sdp)
            seen: list[dict[str, Any]] = []
            await caller.until("session.started", seen)
            yield caller, seen
        finally:
            await caller.close()


async def test_a_text_message_that_is_not_utf8_gets_a_typed_error_and_the_session_goes_on() -> None:
    async with started_caller() as (caller, seen):
        await send_raw_text(caller.channel, b"\xff\xfe{bad")
        refused = await caller.until("error", seen)
        assert refused["error"]["code"] == "invalid_json"
        caller.channel.send(json.dumps({"type": "session.input_audio.mute", "event_id": "m"}))
        await caller.until("session.input_audio.muted", seen)


async def test_a_binary_message_is_refused_in_the_data_channels_words_and_the_session_goes_on() -> None:
    """Before, the caller was told to send "a text WebSocket message", on a session that has no WebSocket."""
    async with started_caller() as (caller, seen):
        caller.channel.send(b'{"type": "session.input_audio.mute"}')
        refused = (await caller.until("error", seen))["error"]
        assert refused["code"] == "invalid_event" and "data channel" in refused["message"], refused
        assert "WebSocket" not in refused["message"]
        caller.channel.send(json.dumps({"type": "session.input_audio.mute", "event_id": "m"}))
        await caller.until("session.input_audio.muted", seen)


async def test_a_session_started_larger_than_the_caller_takes_is_an_error_not_a_silent_wait() -> None:
    """The caller's SDP says it takes 256 KiB messages; instructions past that made ``session.started`` too large,
    aiortc refused it inside the server's channel callback, and the caller waited for it forever."""
    async with live() as (_, client):
        caller = Caller(silence(0.1))
        try:
            created = await client.live.create(session={"model": "gpt-live-1", "instructions": "x" * 300_000},
                                               transport={"type": "webrtc", "sdp": await caller.offer()})
            await caller.answer(created.transport.sdp)
            refused = await caller.until("error", [])
            assert refused["error"]["code"] == "event_too_large"
            assert "session.started" in refused["error"]["message"]
        finally:
            await caller.close()
