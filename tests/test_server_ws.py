"""The local server over real loopback sockets, with a raw ``websockets`` client.

Every frame in both directions goes through the official SDK oracle.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets

from voxline.base.clock import VirtualClock
from voxline.audio.synth import synthesize
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import EMITTED_EVENT_TYPES, FaultConfig, ServerConfig, add_serve_arguments, main_serve, serve
from voxline.realtime.server.net.cli import config_from_args
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse
from tests.support.local_server import AUTH, KEY, Client, config
from tests.support.oracle import WireRecorder


def b64(samples: np.ndarray) -> str:
    return base64.b64encode(np.asarray(samples, dtype="<i2").tobytes()).decode()


def spoken_turn() -> np.ndarray:
    voice = synthesize("Hello there, what is the weather like?", "tone")
    return np.concatenate([np.zeros(12000, np.int16), voice, np.zeros(24000, np.int16)])


async def test_every_emitted_event_type_is_sent_and_validates() -> None:
    recorder = WireRecorder()
    # without a recogniser, an unscripted turn's transcription fails: .failed is among the types
    async with serve(config(recorder, scenario="tools", hearing="off")) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            transcription = {"model": "gpt-4o-mini-transcribe"}
            await c.send(
                {
                    "type": "session.update",
                    "session": {"type": "realtime", "audio": {"input": {"transcription": transcription}}},
                }
            )
            await c.until("session.updated")
            await c.send({"type": "nope"}, invalid=True)
            await c.until("error")
            audio = spoken_turn()
            for i in range(0, len(audio), 4800):
                await c.send({"type": "input_audio_buffer.append", "audio": b64(audio[i : i + 4800])})
            turn = await c.until("response.done")
            call = next(o for o in turn[-1]["response"]["output"] if o["type"] == "function_call")
            output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"sky": "clear"}'}
            await c.send({"type": "conversation.item.create", "item": output})
            await c.until("conversation.item.done")
            await c.send({"type": "response.create"})
            reply = (await c.until("response.done"))[-1]["response"]["output"][0]["id"]
            await c.send(
                {"type": "conversation.item.truncate", "item_id": reply, "content_index": 0, "audio_end_ms": 100}
            )
            await c.until("conversation.item.truncated")
            await c.send({"type": "conversation.item.retrieve", "item_id": reply})
            await c.until("conversation.item.retrieved")
            await c.send({"type": "conversation.item.delete", "item_id": reply})
            await c.until("conversation.item.deleted")
            await c.send({"type": "input_audio_buffer.append", "audio": b64(np.zeros(4800, np.int16))})
            await c.send({"type": "input_audio_buffer.clear"})
            await c.until("input_audio_buffer.cleared")
            await c.send(
                {"type": "response.create", "response": {"conversation": "none", "output_modalities": ["text"]}}
            )
            await c.until("response.done")
            idle = {"type": "server_vad", "idle_timeout_ms": 100}
            await c.send(
                {
                    "type": "session.update",
                    "session": {
                        "type": "realtime",
                        "output_modalities": ["text"],
                        "audio": {"input": {"turn_detection": idle}},
                    },
                }
            )
            await c.until("session.updated")
            await c.send({"type": "response.create"})  # the scripted parallel calls
            await c.until("response.done")
            prompted = await c.until("response.done")  # after the idle timeout
            assert [e["type"] for e in prompted][:2] == ["rate_limits.updated", "input_audio_buffer.timeout_triggered"]
    recorder.verify()
    assert recorder.types("in") == EMITTED_EVENT_TYPES


async def test_admission_errors_are_http_by_default() -> None:
    async with serve(config()) as server:
        cases = [
            ({}, "/realtime?model=m", 401, None),
            ({"Authorization": "Bearer sk-wrong"}, "/realtime?model=m", 401, "invalid_api_key"),
            (AUTH, "/realtime", 400, "missing_model"),
            (AUTH, "/elsewhere?model=m", 404, None),
        ]
        for headers, path, status, code in cases:
            with pytest.raises(websockets.InvalidStatus) as info:
                async with websockets.connect(server.url + path, additional_headers=headers):
                    pass
            assert info.value.response.status_code == status
            body = json.loads(info.value.response.body)
            assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error"
            assert KEY not in info.value.response.body.decode() and "sk-wrong" not in info.value.response.body.decode()


@pytest.mark.parametrize(
    ("headers", "path", "close_code", "code"),
    [
        ({}, "/realtime?model=m", 3000, None),
        ({"Authorization": "Bearer sk-wrong"}, "/realtime?model=m", 3000, "invalid_api_key"),
        (AUTH, "/realtime", 4000, "missing_model"),
    ],
)
async def test_admission_errors_in_band_like_the_service(
    headers: dict[str, str], path: str, close_code: int, code: str | None
) -> None:
    recorder = WireRecorder()
    async with serve(config(recorder, reject_in_band=True)) as server:
        async with websockets.connect(server.url + path, additional_headers=headers) as ws:
            event = json.loads(await ws.recv())
            assert event["type"] == "error" and event["error"]["code"] == code
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert ws.close_code == close_code
            assert ws.close_reason == (f"invalid_request_error.{code}" if code else "invalid_request_error")
    recorder.verify()


async def test_beta_header_gets_beta_api_shape_disabled_then_4000() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder)) as server:
        headers = {**AUTH, "OpenAI-Beta": "realtime=v1"}
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=headers) as ws:
            event = json.loads(await ws.recv())
            assert event["error"]["code"] == "beta_api_shape_disabled"
            assert (
                event["error"]["message"]
                == "The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA API."
            )
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 4000
    recorder.verify()


async def test_a_model_items_done_names_the_item_before_it_as_its_added_does() -> None:
    """``conversation.item.done`` of an assistant item lacked ``previous_item_id`` (a client reading it took every
    reply for the conversation's first item); now it names the item before it, even one placed there meanwhile."""
    recorder = WireRecorder()
    async with serve(config(recorder, speed=10.0)) as server:  # the reply streams while the second item comes
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]}
            await c.send({"type": "conversation.item.create", "item": {**user, "id": "item_user1"}})
            await c.until("conversation.item.done")
            await c.send({"type": "response.create"})
            added = (await c.until("conversation.item.added"))[-1]
            assert added["previous_item_id"] == "item_user1"
            reply = added["item"]["id"]
            # an item put between the two while the reply streams: the reply follows it now
            await c.send({"type": "conversation.item.create", "previous_item_id": "item_user1",
                          "item": {**user, "id": "item_user2"}})
            done = (await _until_done_of(c, reply))[-1]
            assert done["previous_item_id"] == "item_user2"
    recorder.verify()


async def _until_done_of(c: Client, item_id: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        seen += await c.until("conversation.item.done")
        if seen[-1]["item"]["id"] == item_id:
            return seen


async def test_a_beta_only_event_gets_beta_api_shape_disabled_then_4000() -> None:
    """The service's answer to ``transcription_session.update`` on a GA session; before, it was an unknown type and
    the session went on. (No wire oracle here: the event is not one of the GA protocol's.)"""
    async with serve(config()) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            assert [json.loads(await ws.recv())["type"] for _ in range(2)] == ["session.created", "conversation.created"]
            await ws.send(json.dumps({"type": "transcription_session.update", "event_id": "b1",
                                      "session": {"input_audio_format": "pcm16"}}))
            event = json.loads(await ws.recv())
            assert (event["type"], event["error"]["code"], event["error"]["event_id"]) == (
                "error", "beta_api_shape_disabled", "b1")
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert (ws.close_code, ws.close_reason) == (4000, "invalid_request_error.beta_api_shape_disabled")


async def http(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """A minimal HTTP/1.1 exchange on a fresh connection (the server closes after answering)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", "Host: local", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


async def test_client_secrets_mint_ephemeral_keys_that_open_sessions() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder)) as server:
        request = {
            "expires_after": {"anchor": "created_at", "seconds": 60},
            "session": {"type": "realtime", "instructions": "Be brief."},
        }
        status, body = await http(
            server.port, "POST", "/v1/realtime/client_secrets", json.dumps(request).encode(), AUTH
        )
        assert status == 200 and body["value"].startswith("ek_")
        assert body["session"]["instructions"] == "Be brief." and body["session"]["object"] == "realtime.session"
        async with websockets.connect(
            f"{server.url}/realtime?model=m", additional_headers={"Authorization": f"Bearer {body['value']}"}
        ) as ws:
            created = json.loads(await ws.recv())
            assert created["session"]["instructions"] == "Be brief."
        assert (
            await http(server.port, "POST", "/v1/realtime/client_secrets", b"{}", {"Authorization": "Bearer sk-no"})
        )[0] == 401
        assert (await http(server.port, "POST", "/v1/realtime/client_secrets", b"{}"))[0] == 401
        status, body = await http(server.port, "POST", "/v1/realtime/client_secrets", b"{oops", AUTH)
        assert status == 400 and body["error"]["code"] == "invalid_json"
        bad = {"expires_after": {"seconds": 5}}
        status, body = await http(server.port, "POST", "/v1/realtime/client_secrets", json.dumps(bad).encode(), AUTH)
        assert status == 400 and body["error"]["code"] == "integer_below_min_value"
        assert (await http(server.port, "POST", "/v1/other", b"", AUTH))[0] == 404
    recorder.verify()


async def test_a_client_secret_used_for_a_transcription_socket_is_an_error_and_a_close_not_a_crash(
        caplog: pytest.LogCaptureFixture) -> None:
    """A realtime session's key on ``?intent=transcription``: the socket closed with 1011 and no reason, and the
    server logged a traceback."""
    async with serve(config()) as server:
        status, body = await http(server.port, "POST", "/v1/realtime/client_secrets",
                                  json.dumps({"session": {"type": "realtime"}}).encode(), AUTH)
        assert status == 200
        async with websockets.connect(f"{server.url}/realtime?intent=transcription",
                                      additional_headers={"Authorization": f"Bearer {body['value']}"}) as ws:
            error = json.loads(await ws.recv())
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
    assert error["type"] == "error" and "transcription session" in error["error"]["message"]
    assert ws.close_code == 4000
    assert "Traceback" not in caplog.text and "connection handler failed" not in caplog.text


async def test_the_sdk_mints_a_transcription_key_that_opens_a_transcription_socket() -> None:
    """The official client's ``client_secrets.create(session={"type": "transcription", …})`` was refused: the
    endpoint made every key's session a realtime one ("Passing a transcription session update event to a
    realtime session is not allowed")."""
    from openai import AsyncOpenAI

    async with serve(config()) as server:
        client = AsyncOpenAI(api_key=KEY, base_url=server.url.replace("ws://", "http://"))
        minted = await client.realtime.client_secrets.create(session={
            "type": "transcription", "audio": {"input": {"transcription": {"model": "gpt-4o-transcribe"}}}})
        assert minted.value.startswith("ek_") and minted.session.type == "transcription"
        async with websockets.connect(f"{server.url}/realtime?intent=transcription",
                                      additional_headers={"Authorization": f"Bearer {minted.value}"}) as ws:
            created = json.loads(await ws.recv())
        assert created["type"] == "session.created" and created["session"]["type"] == "transcription"


async def test_dates_follow_the_injected_clock() -> None:
    """``expires_at`` of a session and of a client secret, and the secret's expiry, come from ``clock.wall()``."""
    clock = VirtualClock(wall_start=1_800_000_000.0)
    recorder = WireRecorder()
    async with serve(config(recorder, clock=clock, max_session_s=900)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            created = json.loads(await ws.recv())
            assert created["session"]["expires_at"] == 1_800_000_000 + 900
        request = json.dumps({"expires_after": {"anchor": "created_at", "seconds": 60}}).encode()
        status, body = await http(server.port, "POST", "/v1/realtime/client_secrets", request, AUTH)
        assert status == 200 and body["expires_at"] == 1_800_000_000 + 60
        secret = {"Authorization": f"Bearer {body['value']}"}
        clock.advance(59.0)
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=secret) as ws:
            assert json.loads(await ws.recv())["session"]["expires_at"] == 1_800_000_059 + 900
        clock.advance(1.0)
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=secret):
                pass
        assert refused.value.response.status_code == 401
    recorder.verify()


async def test_a_placeholder_reply_is_voiced_by_the_session_and_streamed() -> None:
    """The default scenario's second reply says how much audio was heard: voiced per session, off the loop."""
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="default")) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            await c.send({"type": "response.create"})
            await c.until("response.done")
            await c.send({"type": "response.create"})
            events = await c.until("response.done")
    text = only_transcript(events)
    assert text.startswith("I heard about 0.0 seconds of audio from you.")
    audio = b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta")
    assert audio == synthesize(text, "tone").astype("<i2").tobytes()
    assert events[-1]["response"]["status"] == "completed"
    recorder.verify()


def only_transcript(events: list[dict[str, Any]]) -> str:
    (done,) = [e for e in events if e["type"] == "response.output_audio_transcript.done"]
    return str(done["transcript"])


async def test_extra_http_routes_can_answer_raw_bodies() -> None:
    async def answer(request: HttpRequest) -> HttpResponse:
        return HttpResponse(201, b"v=0 " + request.body, "application/sdp", {"Location": "/v1/realtime/calls/rtc_1"})

    async with serve(config()) as server:
        server.add_route("POST", "/v1/realtime/calls", answer)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /v1/realtime/calls HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\noffer")
        await writer.drain()
        raw = await reader.read()
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 201") and b"Content-Type: application/sdp" in head
    assert b"Location: /v1/realtime/calls/rtc_1" in head and body == b"v=0 offer"


async def test_binary_and_malformed_frames_leave_the_session_usable() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            await c.send(b"\x00" * 64, invalid=True)
            assert (await c.until("error"))[-1]["error"]["code"] == "invalid_event"
            await c.send("not json", invalid=True)
            assert (await c.until("error"))[-1]["error"]["code"] == "invalid_json"
            await c.send({"type": "response.create", "event_id": "ok"})
            await c.until("response.done")
    recorder.verify()


async def test_drop_after_events_cuts_the_connection_without_a_close_frame() -> None:
    async with serve(config(faults=FaultConfig(drop_after_events=3))) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "response.create"}))
            received = []
            with pytest.raises(websockets.ConnectionClosedError):
                while True:
                    received.append(json.loads(await ws.recv()))
            assert len(received) == 3 and ws.close_code == 1006


async def test_close_after_events_and_rejected_connections() -> None:
    faults = FaultConfig(close_after_events=2, reject_first_connections=1)
    async with serve(config(faults=faults)) as server:
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH):
                pass
        assert info.value.response.status_code == 503
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            assert [json.loads(await ws.recv())["type"] for _ in range(2)] == [
                "session.created",
                "conversation.created",
            ]
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1011


async def test_session_expiry_sends_the_error_then_closes_1001() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder, max_session_s=0.2)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            error = (await c.until("error"))[-1]["error"]
            assert (error["code"], error["message"]) == (
                "session_expired",
                "Your session hit the maximum duration of 1 minute.",
            )
            with pytest.raises(websockets.ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1001
    recorder.verify()


async def test_responses_stream_while_the_client_keeps_sending() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="long", speed=50.0)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.send({"type": "response.create"})
            await c.until("response.output_audio.delta")
            await c.send({"type": "response.cancel"})
            tail = await c.until("response.done")
            assert tail[-1]["response"]["status"] == "cancelled"
            await c.send({"type": "response.create"})
            assert (await c.until("response.created"))[-1]["type"] == "response.created"
    recorder.verify()


async def test_pacing_follows_the_injected_clock() -> None:
    """Speed 2 with 100 ms chunks: by virtual time T the client has the chunks due at k x 0.05 <= T."""
    clock = VirtualClock()
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="long", speed=2.0, clock=clock)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=m", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)

            async def deltas_until(t: float) -> int:
                async with asyncio.timeout(10):  # until the pacer sleeps towards a step after t
                    while not t < (deadline := clock.next_deadline() or math.inf) < 1000:
                        if deadline <= t:
                            clock.advance_to(deadline)
                        await asyncio.sleep(0)
                # a marker: its error is queued after everything the pacer produced up to t
                await c.send({"type": "conversation.item.retrieve", "item_id": "marker"})
                events = await c.until("error")
                return sum(e["type"] == "response.output_audio.delta" for e in events)

            await c.send({"type": "response.create"})
            assert await deltas_until(0.0) == 1
            assert await deltas_until(0.05) == 1
            assert await deltas_until(0.49) == 8  # chunks 2..9
            assert await deltas_until(0.5) == 1
    recorder.verify()


def test_non_loopback_without_a_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="requires an API key"):
        ServerConfig(host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", api_key="k").api_key == "k"
    assert "secret-value" not in repr(ServerConfig(host="0.0.0.0", api_key="k-secret-value"))


async def test_url_and_port() -> None:
    server = await serve(config())
    async with server:
        assert server.port > 0 and server.url == f"ws://127.0.0.1:{server.port}/v1"
        assert server.http_url == f"http://127.0.0.1:{server.port}/v1"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(list(argv))


def test_serve_arguments_build_the_config() -> None:
    cfg = config_from_args(
        parse("--port", "0", "--scenario", "long", "--voice", "tone", "--speed", "instant", "--api-key", "k")
    )
    assert (cfg.port, cfg.scenario, cfg.voice, cfg.speed, cfg.api_key) == (0, "long", "tone", float("inf"), "k")
    assert config_from_args(parse()).host == "127.0.0.1" and config_from_args(parse()).port == 8765


def test_close_timeout_reaches_the_config_and_so_the_workers_stop_grace(capsys: pytest.CaptureFixture[str]) -> None:
    """Before, serve had no flag for it: every close waited the default 10 s. Each --workers process builds its
    config from the same arguments (config_from_args), and the supervisor its stop grace from that config."""
    from voxline.realtime.server.net.workers import stop_grace_s

    given = config_from_args(parse("--close-timeout", "2.5"))
    assert given.close_timeout_s == 2.5 and stop_grace_s(given) == 2 * 2.5 + 1.0
    assert config_from_args(parse()).close_timeout_s == ServerConfig().close_timeout_s == 10.0
    for bad in ("-1", "0", "soon", "nan", "inf", "601"):
        with pytest.raises(SystemExit):
            parse("--close-timeout", bad)
        err = capsys.readouterr().err
        assert f"argument --close-timeout: expected a number of seconds above 0 and up to 600, not '{bad}'" in err


def test_max_calls_follows_the_descriptor_limit_unless_given(capsys: pytest.CaptureFixture[str]) -> None:
    """Half the descriptors at four a call, at least one and at most 1024 calls; a flag, or the library's field,
    says otherwise. Each --workers process has descriptors of its own, and builds its config from the same flag."""
    from voxline.realtime.server.net.call_slots import calls_for_descriptors, default_max_calls

    assert [calls_for_descriptors(n) for n in (1024, 256, 7, 1_048_576, None)] == [128, 32, 1, 1024, 1024]
    assert ServerConfig().max_calls == default_max_calls() == config_from_args(parse()).max_calls
    script = ("import resource\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
              "from voxline.realtime.server import ServerConfig\nprint(ServerConfig().max_calls)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "32", run.stderr
    assert config_from_args(parse("--max-calls", "3")).max_calls == 3
    for bad in ("0", "-4", "many", "2.5"):
        with pytest.raises(SystemExit):
            parse("--max-calls", bad)
        assert f"argument --max-calls: expected a whole number of calls, at least 1, not '{bad}'" in capsys.readouterr().err


async def test_main_serve_reports_configuration_errors_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert await main_serve(parse("--host", "0.0.0.0")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "requires an API key" in err


async def test_main_serve_exits_as_every_command_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """2 for a command line that cannot work as given, 1 for the rest (a file's content), as the README says of
    every command. Before, every configuration error of serve's was 2."""
    assert await main_serve(parse("--scenario", "no-such-scenario")) == 2
    assert "unknown scenario" in capsys.readouterr().err
    assert await main_serve(parse("--voice", "shout")) == 2
    assert "(see voxline serve --help)" in capsys.readouterr().err
    broken = tmp_path / "broken.toml"
    broken.write_text("turns = [", encoding="utf-8")
    assert await main_serve(parse("--scenario", str(broken))) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid TOML" in err


async def banner_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``voxline serve ARGV`` prints once it is up (the server is stopped again)."""
    task = asyncio.create_task(main_serve(parse("--port", "0", "--voice", "tone", *argv)))
    try:
        async with asyncio.timeout(10):
            while not (out := capsys.readouterr().out):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return out


async def test_main_serve_prints_one_honest_line_then_serves(capsys: pytest.CaptureFixture[str]) -> None:
    out = await banner_of(capsys)
    assert out.count("\n") == 1
    assert "voxline local server at ws://127.0.0.1:" in out and "detects speech by energy" in out
    assert "scripted replies" in out and "machine-made by an offline recogniser" in out and "approximate" in out


async def test_main_serve_without_hearing_says_it_does_not_understand_speech(capsys: pytest.CaptureFixture[str]) -> None:
    out = await banner_of(capsys, "--hearing", "off")
    assert "does not understand speech" in out and "then transcription fails" in out


async def test_each_streaming_step_takes_its_turn_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # many sessions' replies must not hold up the reading of client audio: the pacer's steps are bulk work
    from voxline.base.loop_share import LoopShare
    from voxline.realtime.server.net import ws_session

    class CountingShare(LoopShare):
        turns = 0

        def ticket(self) -> asyncio.Future[None] | None:
            CountingShare.turns += 1
            return super().ticket()

    share = CountingShare()
    monkeypatch.setattr(ws_session, "loop_share", lambda: share)
    # no burst: at 50x real time a 30 ms one would stream fifteen chunks a step
    async with serve(config(speed=50.0, scenario="long", hearing="off", burst_s=0.0)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=AUTH) as ws:
            await ws.send(json.dumps({"type": "response.create"}))
            deltas = 0
            async with asyncio.timeout(30):  # a guard against a hang, not a timing check
                while (event := json.loads(await ws.recv()))["type"] != "response.done":
                    deltas += event["type"] == "response.output_audio.delta"
    assert deltas > 20
    assert CountingShare.turns >= deltas // 4  # a step streams a few chunks at most; each asked for its turn
