"""Server-side control of WebRTC calls, driven by the official SDK against the local server.

The "kiosk" is a bare aiortc peer with the ``oai-events`` channel; the backend uses the SDK:
``calls.create(sdp=…, session=…)`` (multipart), ``realtime.connect(call_id=…)`` (the sideband
socket, API key) and ``calls.hangup``. Every frame on the channel and on the sideband goes
through the oracle.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from openai import AsyncOpenAI, BadRequestError, InternalServerError

from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.http_message import HttpRequest
from voxline.realtime.server.engine.multipart import boundary_of, parse_form
from voxline.realtime.server.live import rtc as live_rtc
from voxline.realtime.server.net import rtc_call, rtc_offer
from voxline.realtime.server.net import webrtc as server_webrtc
from voxline.realtime.server.net.timing import first_of
from tests.support.engine_harness import failing_polls
from tests.support.oracle import WireRecorder, check_server_event
from tests.support.sideband_probe import probe_sidebands, sideband_tasks

KEY = "sk-calls-test"
TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}


class Kiosk:
    """A bare WebRTC peer: the data channel's events in a queue, every frame recorded."""

    def __init__(self, wire: WireRecorder, *, channel: bool = True) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.wire = wire
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.opened = asyncio.Event()  # the channel, or without one the connection
        if channel:
            self.channel = self.pc.createDataChannel("oai-events")
            self.channel.on("message", self._on_message)
            self.channel.on("close", self.closed.set)
            self.channel.on("open", self.opened.set)
        self.pc.on("connectionstatechange", self._on_state)
        self.pc.addTransceiver("audio")

    def _on_message(self, text: str) -> None:
        self.wire("in", text)
        self.events.put_nowait(json.loads(text))

    def _on_state(self) -> None:
        if self.pc.connectionState in ("closed", "failed"):
            self.closed.set()
        elif self.pc.connectionState == "connected" and not hasattr(self, "channel"):
            self.opened.set()

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return str(self.pc.localDescription.sdp)

    async def answer(self, sdp: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))
        async with asyncio.timeout(10):
            await self.opened.wait()

    async def until(self, type_: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(15):
            while True:
                seen.append(await self.events.get())
                if seen[-1]["type"] == type_:
                    return seen


async def sideband_until(conn: Any, wire: WireRecorder, type_: str) -> list[dict[str, Any]]:
    """Events on the SDK's sideband connection up to the first ``type_``, each recorded as raw JSON."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(15):
        while True:
            text = await conn.recv_bytes()
            wire("in", text.decode() if isinstance(text, bytes) else text)
            seen.append(json.loads(text))
            if seen[-1]["type"] == type_:
                return seen


@asynccontextmanager
async def server_and_kiosk(*, channel: bool = True, **overrides: Any
                           ) -> AsyncIterator[tuple[Any, AsyncOpenAI, Kiosk, WireRecorder]]:
    wire, server_wire = WireRecorder(), WireRecorder()

    def on_server_wire(direction: str, text: str) -> None:
        server_wire("out" if direction == "in" else "in", text)

    settings: dict[str, Any] = {"port": 0, "voice": "tone", "speed": float("inf"), "api_key": KEY,
                                "scenario": "tools", "on_wire": on_server_wire}
    async with serve(ServerConfig(**{**settings, **overrides})) as server:
        kiosk = Kiosk(wire, channel=channel)
        client = AsyncOpenAI(api_key=KEY, base_url=server.http_url, websocket_base_url=server.url)
        try:
            yield server, client, kiosk, wire
        finally:
            await kiosk.pc.close()
            await client.close()
    wire.verify()
    server_wire.verify()


async def create_call(client: AsyncOpenAI, kiosk: Kiosk, session: dict[str, Any]) -> str:
    raw = await client.realtime.calls.with_raw_response.create(sdp=await kiosk.offer(), session=session)
    assert raw.status_code == 201 and raw.headers["content-type"] == "application/sdp"
    await kiosk.answer(raw.text if hasattr(raw, "text") else (await raw.read()).decode())
    call_id = raw.headers["location"].rsplit("/", 1)[-1]
    assert call_id.startswith("rtc_")
    return call_id


async def test_the_sdk_creates_a_call_with_a_session_and_the_sideband_runs_its_tools() -> None:
    session = {"type": "realtime", "instructions": "You are a kiosk.", "tools": [TOOL],
               "audio": {"output": {"voice": "marin"}}}
    async with server_and_kiosk() as (_server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, session)
        created = (await kiosk.until("session.created"))[-1]["session"]
        assert created["instructions"] == "You are a kiosk." and created["tools"][0]["name"] == "get_weather"
        assert created["audio"]["output"]["voice"] == "marin"

        async with client.realtime.connect(call_id=call_id) as backend:
            opening = await sideband_until(backend, wire, "conversation.created")
            assert opening[0]["type"] == "session.created" and opening[0]["session"]["tools"][0]["name"] == "get_weather"
            # The kiosk asks; the model calls a tool; the backend sees the call and answers it.
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]}
            kiosk.channel.send(json.dumps({"type": "conversation.item.create", "item": item}))
            kiosk.channel.send(json.dumps({"type": "response.create"}))
            seen = await sideband_until(backend, wire, "response.done")
            calls = [o for o in seen[-1]["response"]["output"] if o["type"] == "function_call"]
            assert [c["name"] for c in calls] == ["get_weather"]
            await backend.conversation.item.create(
                item={"type": "function_call_output", "call_id": calls[0]["call_id"], "output": '{"temp": 21}'}
            )
            await backend.response.create()
            after = await sideband_until(backend, wire, "response.done")
            assert after[-1]["response"]["status"] == "completed"
            # The kiosk saw all of it on its channel, including what the backend sent.
            kiosk_seen = await kiosk.until("response.done")
            kiosk_seen += await kiosk.until("response.done")
            added = [e["item"]["type"] for e in kiosk_seen if e["type"] == "conversation.item.added"]
            assert "function_call" in added and "function_call_output" in added
            # A sideband error goes back to the sideband only.
            await backend.send({"type": "response.cancel", "event_id": "evt_cancel"})  # nothing is active
            error = (await sideband_until(backend, wire, "error"))[-1]
            assert error["error"]["code"] == "response_cancel_not_active"
            await backend.session.update(session={"type": "realtime", "instructions": "Be brief."})
            updated = (await kiosk.until("session.updated"))[-1]
            assert updated["session"]["instructions"] == "Be brief."
            assert all(e["type"] != "error" for e in kiosk_seen)

            await client.realtime.calls.hangup(call_id)
            async with asyncio.timeout(10):
                await kiosk.closed.wait()
                with pytest.raises(websockets.ConnectionClosed) as closed:  # the sideband ends with the call
                    while True:
                        await backend.recv_bytes()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


async def test_hanging_up_from_the_kiosk_ends_the_sideband() -> None:
    async with server_and_kiosk() as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        async with client.realtime.connect(call_id=call_id) as backend:
            await sideband_until(backend, wire, "conversation.created")
            await kiosk.pc.close()
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(10):
                    while True:
                        await backend.recv_bytes()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
        async with asyncio.timeout(10):
            while server._calls.active:
                await asyncio.sleep(0.01)
        with pytest.raises(Exception, match="404"):
            await client.realtime.calls.hangup(call_id)


async def test_a_caller_without_a_data_channel_is_served_by_its_sideband(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kiosk that sends only media: the call opens when its peer connects, the sideband gets the opening events
    before anything else, and the call outlives the wait for a channel. Before, the sideband's response events came
    without a ``session.created``, and the call ended mid-reply when that wait ran out."""
    monkeypatch.setattr(rtc_call, "CHANNEL_TIMEOUT_S", 0.2)
    async with server_and_kiosk(channel=False) as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        async with client.realtime.connect(call_id=call_id) as backend:
            opening = await sideband_until(backend, wire, "conversation.created")
            assert [e["type"] for e in opening] == ["session.created", "conversation.created"]
            call = server._calls.find(call_id)
            assert call is not None
            await asyncio.sleep(0.4)  # the wait for a channel runs out meanwhile (a guard, not a measurement)
            await backend.response.create()
            seen = await sideband_until(backend, wire, "response.done")
            assert seen[-1]["response"]["status"] == "completed" and not call.ended


async def test_offers_past_max_calls_are_refused_with_503_and_an_ended_call_frees_its_place(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, every offer started a peer connection, however many ran: a burst held the process's descriptors
    until every session failed. The places are shared with GPT-Live's WebRTC sessions, and an offer refused as bad
    SDP gives its place back at once. No caller here connects: a call holds its place from its answer on."""
    caplog.set_level(logging.INFO, logger="voxline.server")
    peers = [Kiosk(WireRecorder()) for _ in range(3)]
    try:
        offers = [await peer.offer() for peer in peers]
        async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, max_calls=2)) as server:
            async with AsyncOpenAI(api_key=KEY, base_url=server.http_url, max_retries=0) as client:
                with pytest.raises(BadRequestError, match="Invalid SDP offer"):
                    await client.realtime.calls.create(sdp="v=0\r\nm=audio\r\n")
                first = await client.realtime.calls.with_raw_response.create(sdp=offers[0])
                second = await client.realtime.calls.with_raw_response.create(sdp=offers[1])
                assert first.status_code == second.status_code == 201
                with pytest.raises(InternalServerError) as refused:
                    await client.realtime.calls.create(sdp=offers[2])
                assert refused.value.status_code == 503
                assert refused.value.body == {
                    "type": "server_error", "code": "too_many_calls", "param": None,
                    "message": "Too many WebRTC calls at once: this server runs at most 2; try again when one ends."}
                said = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
                assert said == ["refused a WebRTC call: 2 WebRTC calls are running, the most this server takes "
                                "(max_calls)"] and caplog.records[-1].levelno == logging.INFO
                with pytest.raises(InternalServerError, match="503 - Too many WebRTC calls"):  # Live's take them too
                    await client.live.create(session={"model": "gpt-live-1"},
                                             transport={"type": "webrtc", "sdp": offers[2]})
                await client.realtime.calls.hangup(first.headers["location"].rsplit("/", 1)[-1])
                async with asyncio.timeout(10):  # the hung-up call ends (its peer closed), and its place is free
                    while True:
                        try:
                            third = await client.realtime.calls.with_raw_response.create(sdp=offers[2])
                        except InternalServerError:
                            await asyncio.sleep(0.05)
                        else:
                            break
                assert third.status_code == 201
    finally:
        for peer in peers:
            await peer.pc.close()


async def test_a_beta_only_event_on_a_sideband_closes_that_socket_and_the_call_goes_on() -> None:
    """As on a WebSocket session: the error, then a close with 4000; before, the sideband went on as if nothing had
    been said. The call is the kiosk's and stays. (The server's wire oracle is off: the event is not the GA API's.)"""
    async with server_and_kiosk(on_wire=None) as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        await kiosk.until("conversation.created")
        async with websockets.connect(f"{server.url}/realtime?call_id={call_id}",
                                      additional_headers={"Authorization": f"Bearer {KEY}"}) as backend:
            async with asyncio.timeout(10):
                while json.loads(await backend.recv())["type"] != "conversation.created":
                    pass
                await backend.send(json.dumps({"type": "transcription_session.update", "session": {}}))
                error = json.loads(await backend.recv())
                assert (error["type"], error["error"]["code"]) == ("error", "beta_api_shape_disabled")
                with pytest.raises(websockets.ConnectionClosed):
                    await backend.recv()
            assert (backend.close_code, backend.close_reason) == (4000, "invalid_request_error.beta_api_shape_disabled")
        kiosk.channel.send(json.dumps({"type": "response.create"}))
        assert (await kiosk.until("response.done"))[-1]["response"]["status"] == "completed"


async def test_a_sideband_needs_the_api_key_and_a_live_call() -> None:
    async with server_and_kiosk() as (server, client, kiosk, _wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        secret = await client.realtime.client_secrets.create(session={"type": "realtime"})
        for query in (f"call_id={call_id}", f"intent=transcription&call_id={call_id}"):  # the second got through
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(f"{server.url}/realtime?{query}",
                                         additional_headers={"Authorization": f"Bearer {secret.value}"})
            assert refused.value.response.status_code == 401
            assert b"needs an API key" in refused.value.response.body
        with pytest.raises(websockets.InvalidStatus) as missing:
            await websockets.connect(f"{server.url}/realtime?call_id=rtc_nope", additional_headers={"Authorization": f"Bearer {KEY}"})
        assert missing.value.response.status_code == 404
        assert json.loads(missing.value.response.body)["error"]["code"] == "call_not_found"


async def test_an_invalid_session_part_is_refused_with_the_validators_error() -> None:
    async with server_and_kiosk() as (_server, client, kiosk, _wire):
        offer = await kiosk.offer()
        with pytest.raises(Exception) as caught:
            await client.realtime.calls.create(sdp=offer, session={"type": "realtime", "modalities": ["audio"]})  # type: ignore[typeddict-unknown-key]
        assert getattr(caught.value, "status_code", None) == 400
        assert "Unknown parameter: 'session.modalities'" in str(caught.value)


async def test_null_in_the_session_part_is_not_given() -> None:
    async with server_and_kiosk() as (_server, client, kiosk, _wire):
        call_id = await create_call(client, kiosk, {"type": "realtime", "instructions": None, "tracing": None})  # type: ignore[typeddict-item]
        created = (await kiosk.until("session.created"))[-1]
        check_server_event(created)
        assert call_id and created["session"]["instructions"]


def test_multipart_parsing_as_the_sdk_encodes_it() -> None:
    body = (b"--b0\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\n"
            b"v=0\r\nm=audio\r\n\r\n--b0\r\nContent-Disposition: form-data; name=\"session\"\r\n\r\n{}\r\n--b0--\r\n")
    assert parse_form(body, boundary_of('multipart/form-data; boundary="b0"')) == {
        "sdp": b"v=0\r\nm=audio\r\n", "session": b"{}"}
    for bad in (b"", b"--b0\r\n\r\nx\r\n--b0--", b"--b0\r\nContent-Disposition: form-data; name=\"sdp\"\r\n\r\nx\r\n--b0"):
        with pytest.raises(ValueError):
            parse_form(bad, "b0")
    with pytest.raises(ValueError, match="boundary"):
        boundary_of("multipart/form-data")


async def test_in_band_refusals_of_a_sideband_close_the_socket_like_the_service() -> None:
    async with server_and_kiosk(reject_in_band=True) as (server, _client, _kiosk, wire):
        url = f"{server.url}/realtime?call_id=rtc_gone"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            text = await ws.recv()
            wire("in", text)
            error = json.loads(text)["error"]
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
        assert error["code"] == "call_not_found" and error["param"] == "call_id"
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000


async def test_a_binary_message_is_refused_in_the_words_of_what_carried_it_and_the_call_goes_on() -> None:
    """Before, a binary message on the data channel was answered as if it had come on a WebSocket ("Expected a text
    WebSocket message"), on a call that has none. A sideband is a WebSocket: its binary frame keeps those words, and
    its error goes to it alone. (The server's own record of binary frames is no event: not recorded here.)"""
    async with server_and_kiosk(on_wire=None) as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        await kiosk.until("conversation.created")
        kiosk.channel.send(b'{"type": "response.create"}')
        refused = (await kiosk.until("error"))[-1]["error"]
        assert refused["type"] == "invalid_request_error" and refused["code"] == "invalid_event", refused
        assert "data channel" in refused["message"] and "WebSocket" not in refused["message"]
        url = f"{server.url}/realtime?call_id={call_id}"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as backend:
            async with asyncio.timeout(10):
                while json.loads(await backend.recv())["type"] != "conversation.created":
                    pass
                await backend.send(b"\x00" * 8)
                while (event := json.loads(await backend.recv()))["type"] != "error":
                    pass
            wire("in", json.dumps(event))
            assert "text WebSocket message" in event["error"]["message"]
        kiosk.channel.send(json.dumps({"type": "input_audio_buffer.clear"}))
        seen = await kiosk.until("input_audio_buffer.cleared")
        assert [e for e in seen if e["type"] == "error"] == [] and not kiosk.closed.is_set()


async def test_an_engine_failure_on_a_calls_scheduled_step_is_a_server_error_and_the_call_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on a WebSocket session; before, the pacer's task ended the call (its peer closed) with nothing said."""
    failing_polls(monkeypatch)
    async with server_and_kiosk() as (server, client, kiosk, wire):
        await create_call(client, kiosk, {"type": "realtime"})
        await kiosk.until("conversation.created")
        kiosk.channel.send(json.dumps({"type": "response.create"}))
        assert (await kiosk.until("error"))[-1]["error"]["type"] == "server_error"
        kiosk.channel.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await kiosk.until("input_audio_buffer.cleared")
        assert not kiosk.closed.is_set()


async def test_an_engine_failure_on_a_sideband_frame_is_a_server_error_to_it_and_the_call_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, the exception ended the sideband's reader: the socket closed with 1011 and nothing said."""
    from voxline.realtime.server.engine.core import Engine

    real = Engine.handle

    def flaky(self: Engine, data: dict[str, Any], now: float) -> list[dict[str, Any]]:
        if data.get("type") == "conversation.item.retrieve":
            raise RuntimeError("boom")
        return real(self, data, now)

    monkeypatch.setattr(Engine, "handle", flaky)
    async with server_and_kiosk() as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        await kiosk.until("conversation.created")
        async with client.realtime.connect(call_id=call_id) as backend:
            await sideband_until(backend, wire, "conversation.created")
            await backend.send({"type": "conversation.item.retrieve", "item_id": "item_x"})
            assert (await sideband_until(backend, wire, "error"))[-1]["error"]["type"] == "server_error"
            await backend.input_audio_buffer.clear()
            await sideband_until(backend, wire, "input_audio_buffer.cleared")


async def test_a_sideband_that_never_reads_is_closed_past_the_unsent_limit_and_the_call_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, every event of the call waited for a sideband that never read, until the call ended: now it is closed
    with 4009, what waited let go at once, and the kiosk's call goes on."""
    made = probe_sidebands(monkeypatch, limit=4 * 1024 * 1024)
    audio = base64.b64encode(random.Random(1).randbytes(2 * 1024 * 1024)).decode()  # 2.8 MB each time retrieved
    create = {"type": "conversation.item.create",
              "item": {"id": "big", "type": "message", "role": "user", "content": [{"type": "input_audio", "audio": audio}]}}
    retrieve = json.dumps({"type": "conversation.item.retrieve", "item_id": "big"})
    async with server_and_kiosk(on_wire=None) as (server, client, kiosk, wire):
        call_id = await create_call(client, kiosk, {"type": "realtime"})
        await kiosk.until("conversation.created")
        async with websockets.connect(f"{server.url}/realtime?call_id={call_id}", max_queue=1, max_size=None,
                                      additional_headers={"Authorization": f"Bearer {KEY}"}) as backend:
            [sideband] = made
            await backend.send(json.dumps(create))
            try:
                async with asyncio.timeout(20):  # retrieves until what waits for it passes the limit (the socket's
                    while not sideband.cut_off:   # buffers take some first)
                        await backend.send(retrieve)
                        await first_of(sideband.gone.wait(), asyncio.sleep(0.05))
            except TimeoutError:  # never cut off: the server stopped reading it, and a close would wait for ever
                backend.transport.abort()
                raise
            assert (sideband.unsent, sideband.waiting) == (0, 0)  # let go at once
            kiosk.channel.send(json.dumps({"type": "response.create"}))
            assert (await kiosk.until("response.done"))[-1]["response"]["status"] == "completed"
            assert (sideband.unsent, sideband.waiting) == (0, 0)  # the call's events are not kept for it
            with pytest.raises(websockets.ConnectionClosed):
                async with asyncio.timeout(15):
                    while True:
                        await backend.recv()
            assert (backend.close_code, backend.close_reason) == (4009, "invalid_request_error.sideband_unread_limit")
            async with asyncio.timeout(5):
                await sideband.ended.wait()
            assert not sideband_tasks()
        kiosk.channel.send(json.dumps({"type": "response.create"}))
        assert (await kiosk.until("response.done"))[-1]["response"]["status"] == "completed"


@pytest.mark.parametrize("api", ["realtime", "live"])
async def test_an_offer_given_up_on_while_it_is_answered_closes_its_peer_connection(
        api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request cancelled mid-answer (its deadline, the server closing) gave its place back but left its peer
    connection open, with its sockets, for as long as the process ran."""
    answering: list[RTCPeerConnection] = []
    stuck = asyncio.Event()

    async def answer_for_ever(pc: RTCPeerConnection, *args: Any, **kwargs: Any) -> str:
        answering.append(pc)
        stuck.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    monkeypatch.setattr(server_webrtc, "answer_offer", answer_for_ever)
    monkeypatch.setattr(live_rtc, "answer_offer", answer_for_ever)
    peer = Kiosk(WireRecorder())
    try:
        offer = await peer.offer()
        async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, max_calls=4)) as server:
            headers = {"authorization": f"Bearer {KEY}"}
            if api == "realtime":
                request = HttpRequest("POST", "/v1/realtime/calls", "", {**headers, "content-type": "application/sdp"},
                                      offer.encode())
                handler = server._calls.create(request)
            else:
                body = {"session": {"model": "gpt-live-1"}, "transport": {"type": "webrtc", "sdp": offer}}
                request = HttpRequest("POST", "/v1/live/sessions", "", {**headers, "content-type": "application/json"},
                                      json.dumps(body).encode())
                handler = server._live.http(request)
            task = asyncio.ensure_future(handler)
            async with asyncio.timeout(10):  # a bound, not a timing
                await stuck.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            (pc,) = answering
            assert pc.connectionState == "closed"
    finally:
        await peer.pc.close()


async def test_a_close_that_never_ends_does_not_hold_the_offer_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer connection half set up when its offer is given up on may never finish closing (aiortc then waits for
    a transport that never started): the cancelled request waits for it a bounded time, then ends."""
    async def answer_for_ever(pc: RTCPeerConnection, *args: Any, **kwargs: Any) -> str:
        stuck.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    async def close_for_ever(pc: RTCPeerConnection) -> None:
        await asyncio.Event().wait()

    stuck = asyncio.Event()
    monkeypatch.setattr(server_webrtc, "answer_offer", answer_for_ever)
    monkeypatch.setattr(rtc_offer, "close_peer", close_for_ever)
    monkeypatch.setattr(rtc_offer, "ABANDONED_CLOSE_S", 0.05)
    peer = Kiosk(WireRecorder())
    try:
        offer = await peer.offer()
        async with serve(ServerConfig(port=0, voice="tone", api_key=KEY)) as server:
            request = HttpRequest("POST", "/v1/realtime/calls", "",
                                  {"authorization": f"Bearer {KEY}", "content-type": "application/sdp"}, offer.encode())
            task = asyncio.ensure_future(server._calls.create(request))
            async with asyncio.timeout(10):  # a bound, not a timing
                await stuck.wait()
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=10)  # a bound on the wait, not a timing
            assert task in done and task.cancelled()
    finally:
        await peer.pc.close()
