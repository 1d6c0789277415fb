"""Live over WebSocket on loopback: the official SDK's ``client.live.connect()`` and raw sockets.

Every frame the server sends is validated against ``openai.types.live`` for its audience.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from websockets.asyncio.client import ClientConnection

from voxline.realtime.server import serve
from voxline.realtime.server.live.settings import LiveConfig
from tests.support.engine_harness import silence, speech
from tests.support.live_oracle import check_live_server_event
from tests.support.local_server import AUTH, KEY, config

RATE = 24000


class Wire:
    """The server's frames as it sent them, by the audience they went to (primary or sideband)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(self, direction: str, text: str) -> None:
        if direction == "out" and text.startswith("{"):  # the server's own view: "out" is what it sent
            event = json.loads(text)
            if event.get("type") != "session.input_audio.append":
                self.sent.append(event)


@asynccontextmanager
async def live_server(**overrides: Any) -> AsyncIterator[Any]:
    settings = {"scenario": "default", "transcripts": ("Hello.", "And again."), **overrides}
    async with serve(config(**settings)) as server:
        yield server


def appends(samples: np.ndarray, chunk_ms: int = 40) -> list[str]:
    step = RATE * chunk_ms // 1000
    return [base64.b64encode(np.asarray(samples[i : i + step], "<i2").tobytes()).decode()
            for i in range(0, len(samples), step)]


async def read_until(ws: ClientConnection, kind: str, seen: list[dict[str, Any]], audience: str = "primary") -> dict[str, Any]:
    async with asyncio.timeout(15):
        while True:
            event = json.loads(await ws.recv())
            check_live_server_event(event, audience)
            seen.append(event)
            if event["type"] == kind:
                return event


async def test_a_conversation_through_the_official_sdk() -> None:
    async with live_server() as server:
        client = AsyncOpenAI(api_key=KEY, base_url=server.http_url, websocket_base_url=server.url)
        events: list[Any] = []
        async with client.live.connect() as conn:
            await conn.session.start(session={"model": "gpt-live-1", "audio": {"output": {"voice": "marin"}}},
                                     event_id="start-1")
            started = await conn.recv()
            assert started.type == "session.started" and started.client_event_id == "start-1"
            for chunk in appends(np.concatenate([silence(0.3), speech(0.8), silence(6.0)])):
                await conn.session.input_audio.append(audio=chunk)
            await conn.session.close(event_id="bye")
            async with asyncio.timeout(15):
                async for event in conn:
                    events.append(event)
        kinds = [e.type for e in events]
        assert kinds[-1] == "session.closed" and events[-1].reason == "close_requested"
        assert "".join(e.delta for e in events if e.type == "session.input_transcript.delta") == "Hello."
        said = "".join(e.delta for e in events if e.type == "session.output_transcript.delta")
        assert said.startswith("Hello! This is the voxline local server.")
        audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "session.output_audio.delta")
        assert len(audio) == 2 * RATE * 71 // 10  # 7.1 s of caller audio → 7.1 s of track, whole frames
        assert events[-1].usage.seconds == 7.0


async def test_raw_socket_errors_barge_in_and_close() -> None:
    wire = Wire()
    async with live_server(on_wire=wire) as server:
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            seen: list[dict[str, Any]] = []
            await ws.send(json.dumps({"type": "session.input_audio.append", "audio": "", "event_id": "early"}))
            error = await read_until(ws, "error", seen)
            assert error["error"]["code"] == "session_not_started" and error["client_event_id"] == "early"
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            await read_until(ws, "session.started", seen)
            for chunk in appends(np.concatenate([speech(0.5), silence(1.5)])):
                await ws.send(json.dumps({"type": "session.input_audio.append", "audio": chunk}))
            await read_until(ws, "session.output_transcript.delta", seen)
            for chunk in appends(np.concatenate([speech(0.5), silence(0.2)])):  # talk over it
                await ws.send(json.dumps({"type": "session.input_audio.append", "audio": chunk}))
            await ws.send(json.dumps({"type": "session.close"}))
            closed = await read_until(ws, "session.closed", seen)
            assert closed["reason"] == "close_requested"
            with pytest.raises(websockets.ConnectionClosedOK):
                await ws.recv()
            assert ws.close_code == 1000
        said = "".join(e["delta"] for e in seen if e["type"] == "session.output_transcript.delta")
        full = server.scenario.turns[0].outputs[0].text
        assert said and full.startswith(said) and said != full  # cut by the caller's speech
    for event in wire.sent:
        check_live_server_event(event, "primary")


async def test_refusals_are_http_errors_in_the_services_shape() -> None:
    async with live_server() as server:
        with pytest.raises(websockets.InvalidStatus) as no_key:
            await websockets.connect(f"{server.url}/live/sessions")
        assert no_key.value.response.status_code == 401
        with pytest.raises(websockets.InvalidStatus) as wrong:
            await websockets.connect(f"{server.url}/live/sessions", additional_headers={"Authorization": "Bearer nope"})
        assert wrong.value.response.status_code == 401
        assert json.loads(wrong.value.response.body)["error"]["code"] == "invalid_api_key"
        with pytest.raises(websockets.InvalidStatus) as missing:
            await websockets.connect(f"{server.url}/live/sessions/sess_nope/attach", additional_headers=AUTH)
        assert missing.value.response.status_code == 404
        assert json.loads(missing.value.response.body)["error"]["code"] == "session_not_found"
        with pytest.raises(websockets.InvalidStatus) as unknown:
            await websockets.connect(f"{server.url}/live/sessions/sess_x/other", additional_headers=AUTH)
        assert unknown.value.response.status_code == 404


@pytest.mark.parametrize(("ending", "reason"), [("close_frame", "remote_hangup"), ("drop", "connection_lost"),
                                                ("hangup", "close_requested")])
async def test_a_sideband_sees_the_session_and_how_it_ended(ending: str, reason: str) -> None:
    async with live_server() as server:
        ws = await websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH)
        await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
        seen: list[dict[str, Any]] = []
        session_id = (await read_until(ws, "session.started", seen))["session"]["id"]
        async with websockets.connect(f"{server.url}/live/sessions/{session_id}/attach", additional_headers=AUTH) as side:
            observed: list[dict[str, Any]] = []
            snapshot = await read_until(side, "session.started", observed, "sideband")
            assert snapshot["session"]["id"] == session_id
            for chunk in appends(silence(0.2), chunk_ms=20):
                await ws.send(json.dumps({"type": "session.input_audio.append", "audio": chunk}))
            out = await read_until(side, "session.output_audio.delta", observed, "sideband")
            assert (out["start_ms"], out["end_ms"]) == (0, 100)
            assert any(e["type"] == "session.input_audio.append" for e in observed)
            await side.send(json.dumps({"type": "session.input_audio.mute", "event_id": "mute"}))
            muted = await read_until(side, "session.input_audio.muted", observed, "sideband")
            assert muted["client_event_id"] == "mute"
            if ending == "close_frame":
                await ws.close()
            elif ending == "drop":
                ws.transport.abort()
            else:
                async with asyncio.timeout(5):
                    status = await _post(server, f"/v1/live/sessions/{session_id}/hangup")
                assert status == 200
            closed = await read_until(side, "session.closed", observed, "sideband")
            assert closed["reason"] == reason
            with pytest.raises(websockets.ConnectionClosedOK):
                await side.recv()
        await ws.close()


async def test_expiry_closes_with_expired() -> None:
    async with live_server(live=LiveConfig(max_session_s=0.3)) as server:
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            seen: list[dict[str, Any]] = []
            started = await read_until(ws, "session.started", seen)
            closed = await read_until(ws, "session.closed", seen)
            assert closed["reason"] == "expired" and closed["session"]["expires_at"] == started["session"]["expires_at"]
            with pytest.raises(websockets.ConnectionClosedOK):
                await ws.recv()


async def _post(server: Any, path: str, body: dict[str, Any] | None = None, token: str = KEY) -> int:
    return (await _exchange(server, path, body, token))[0]


async def _exchange(server: Any, path: str, body: dict[str, Any] | None = None,
                    token: str = KEY) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    data = json.dumps(body or {}).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload or b"null")


async def test_an_ephemeral_key_acts_only_on_the_live_sessions_it_started() -> None:
    """As on Realtime calls: an ephemeral key could hang up a session the operator's key started, and fork a
    stored one, its instructions and conversation with it."""
    async with live_server() as server:
        status, minted = await _exchange(server, "/v1/realtime/client_secrets", {"session": {"type": "realtime"}})
        assert status == 200
        ephemeral = minted["value"]
        seen: list[dict[str, Any]] = []
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {
                "model": "gpt-live-1", "store": True, "instructions": "The operator's own instructions."}}))
            theirs = (await read_until(ws, "session.started", seen))["session"]["id"]
            assert await _post(server, f"/v1/live/sessions/{theirs}/hangup", token=ephemeral) == 404
            await ws.send(json.dumps({"type": "session.close"}))
            closed = await read_until(ws, "session.closed", seen)
            assert closed["reason"] == "close_requested"  # the app's own close: the hang-up did nothing
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"{server.url}/live/sessions/{theirs}/fork",
                                     additional_headers={"Authorization": f"Bearer {ephemeral}"})
        assert refused.value.response.status_code == 404
        async with websockets.connect(f"{server.url}/live/sessions",
                                      additional_headers={"Authorization": f"Bearer {ephemeral}"}) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            own = (await read_until(ws, "session.started", seen))["session"]["id"]
            assert await _post(server, f"/v1/live/sessions/{own}/hangup", token=ephemeral) == 200
            assert (await read_until(ws, "session.closed", seen))["reason"] == "close_requested"


async def test_a_stored_closed_session_forks_and_the_conversation_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "two.toml"
    script.write_text('[[turns]]\nsay = "The first answer."\n\n[[turns]]\nsay = "The second answer."\n')
    async with live_server(scenario=str(script)) as server:
        client = AsyncOpenAI(api_key=KEY, base_url=server.http_url, websocket_base_url=server.url)
        async with client.live.connect() as conn:
            await conn.session.start(session={"model": "gpt-live-1", "store": True, "instructions": "Be brief."})
            first = await conn.recv()
            session_id = first.session.id  # type: ignore[union-attr]
            with pytest.raises(websockets.InvalidStatus) as running:
                await websockets.connect(f"{server.url}/live/sessions/{session_id}/fork", additional_headers=AUTH)
            assert running.value.response.status_code == 400
            for chunk in appends(np.concatenate([speech(0.5), silence(3.0)])):
                await conn.session.input_audio.append(audio=chunk)
            await conn.session.close()
            before = [e async for e in conn]
        said_before = "".join(e.delta for e in before if e.type == "session.output_transcript.delta")
        assert said_before == server.scenario.turns[0].outputs[0].text
        async with client.live.forks.connect(session_id=session_id) as fork:
            await fork.session.start(session={}, event_id="fork-start")
            started = await fork.recv()
            assert started.type == "session.started" and started.client_event_id == "fork-start"
            resource = started.session  # type: ignore[union-attr]
            assert resource.id != session_id and resource.model == "gpt-live-1" and resource.instructions == "Be brief."
            history = [(item.role, item.content[0].text) for item in resource.input or []]
            assert history == [("user", "Hello."), ("assistant", said_before)]
            for chunk in appends(np.concatenate([speech(0.5), silence(3.0)])):
                await fork.session.input_audio.append(audio=chunk)
            await fork.session.close()
            after = [e async for e in fork]
        assert "".join(e.delta for e in after if e.type == "session.input_transcript.delta") == "And again."
        said_after = "".join(e.delta for e in after if e.type == "session.output_transcript.delta")
        assert said_after == "The second answer."  # the script's next turn: the conversation went on
        # a fork of the fork: each message once (before, the first session's were given twice, and once more for
        # every later generation)
        async with client.live.forks.connect(session_id=resource.id) as again:
            await again.session.start(session={})
            started = await again.recv()
            history = [(item.role, item.content[0].text) for item in started.session.input or []]  # type: ignore[union-attr]
            assert history == [("user", "Hello."), ("assistant", said_before), ("user", "And again."),
                               ("assistant", said_after)]
            await again.session.close()
            last = [e async for e in again]
        for event in (*before, *after, *last):
            check_live_server_event(event.to_dict(), "primary")


async def test_what_cannot_be_forked_is_refused() -> None:
    async with live_server() as server:
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            seen: list[dict[str, Any]] = []
            session_id = (await read_until(ws, "session.started", seen))["session"]["id"]
            await ws.send(json.dumps({"type": "session.close"}))
            await read_until(ws, "session.closed", seen)
        with pytest.raises(websockets.InvalidStatus) as unstored:  # store was not asked for
            await websockets.connect(f"{server.url}/live/sessions/{session_id}/fork", additional_headers=AUTH)
        assert unstored.value.response.status_code == 404
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1", "store": True}}))
            stored_id = (await read_until(ws, "session.started", seen))["session"]["id"]
            await ws.send(json.dumps({"type": "session.close"}))
            await read_until(ws, "session.closed", seen)
        async with websockets.connect(f"{server.url}/live/sessions/{stored_id}/fork", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1.1"}}))
            error = await read_until(ws, "error", seen)
            assert error["error"]["code"] == "unknown_parameter" and error["error"]["param"] == "session.model"
            await ws.send(json.dumps({"type": "session.start", "session": {"store": None, "audio": None}}))
            started = await read_until(ws, "session.started", seen)  # null is not given, as in a start (it was
            assert started["session"]["store"] is True                # invalid_type): the stored session's value
        async with websockets.connect(f"{server.url}/live/sessions/{stored_id}/fork", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "session": {"store": False}}))
            assert (await read_until(ws, "session.started", seen))["session"]["store"] is False


async def test_a_stored_session_lost_with_its_connection_can_be_forked() -> None:
    async with live_server() as server:
        ws = await websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH)
        await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1", "store": True}}))
        seen: list[dict[str, Any]] = []
        session_id = (await read_until(ws, "session.started", seen))["session"]["id"]
        ws.transport.abort()  # the network goes: no close frame, no session.close
        url = f"{server.url}/live/sessions/{session_id}/fork"
        async with asyncio.timeout(10):
            while True:  # 400 while the server has not yet noticed that the session is gone
                try:
                    fork = await websockets.connect(url, additional_headers=AUTH)
                    break
                except websockets.InvalidStatus as refused:
                    assert refused.response.status_code == 400
                    await asyncio.sleep(0.01)
        async with fork:
            await fork.send(json.dumps({"type": "session.start", "session": {}}))
            started = await read_until(fork, "session.started", seen)
            assert started["session"]["id"] != session_id and started["session"]["store"] is True


async def test_two_sessions_of_a_seeded_server_never_share_ids() -> None:
    """Each Live session's ids were seeded by how many sessions were running: 0 again once the first had closed, so
    the next one repeated its session id (its stored session overwritten) and its event and call ids."""
    async def started(url: str) -> tuple[str, str]:
        async with websockets.connect(url, additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "session.start", "event_id": "s",
                                      "session": {"model": "gpt-live-1", "store": True}}))
            event = json.loads(await ws.recv())
            return event["session"]["id"], event["event_id"]

    async with serve(config(scenario="default", seed=1)) as server:
        url = server.url.replace("/realtime", "").rstrip("/") + "/live/sessions"
        async with asyncio.timeout(20):
            first = await started(url)
            second = await started(url)
    assert first[0] != second[0] and first[1] != second[1], (first, second)


def test_each_session_of_a_seeded_server_derives_ids_of_its_own_the_same_every_run() -> None:
    from voxline.realtime.server.engine.ids import IdFactory

    def first_ids(seed: int | None) -> list[str]:
        server = IdFactory(seed)
        return [server.derived().new("event") for _ in range(3)]

    seeded = first_ids(7)
    assert len(set(seeded)) == 3 and seeded == first_ids(7)  # apart, and repeatable
    assert len(set(first_ids(None) + first_ids(None))) == 6


async def test_a_frame_past_the_servers_frame_limit_is_an_error_and_the_socket_goes_on() -> None:
    """The Live socket took frames up to websockets' own size (four times the limit a Realtime session keeps)."""
    async with live_server(max_frame_bytes=5000) as server:
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            seen: list[dict[str, Any]] = []
            await ws.send(json.dumps({"type": "session.start", "event_id": "big",
                                      "session": {"model": "gpt-live-1", "instructions": "x" * 6000}}))
            error = await read_until(ws, "error", seen)
            assert error["error"]["code"] == "event_too_large", error
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            await read_until(ws, "session.started", seen)


async def test_the_engine_failing_on_a_replys_speech_is_a_server_error_and_the_session_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on Realtime: before, the failure was only logged, and the client was told nothing."""
    from voxline.realtime.server.live.engine import LiveEngine

    def broken(self: LiveEngine, text: str, samples: Any, now: float = 0.0) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(LiveEngine, "provide_speech", broken)
    async with live_server() as server:
        async with websockets.connect(f"{server.url}/live/sessions", additional_headers=AUTH) as ws:
            seen: list[dict[str, Any]] = []
            await ws.send(json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}))
            await read_until(ws, "session.started", seen)
            for chunk in appends(np.concatenate([speech(0.5), silence(1.5)])):
                await ws.send(json.dumps({"type": "session.input_audio.append", "audio": chunk}))
            await read_until(ws, "session.output_transcript.delta", seen)  # a fixed reply: voiced before the session
            for chunk in appends(np.concatenate([speech(0.5), silence(1.5)])):  # the next names the user's seconds
                await ws.send(json.dumps({"type": "session.input_audio.append", "audio": chunk}))
            error = await read_until(ws, "error", seen)
            assert error["error"]["type"] == "server_error"
            await ws.send(json.dumps({"type": "session.close"}))
            assert (await read_until(ws, "session.closed", seen))["reason"] == "close_requested"
