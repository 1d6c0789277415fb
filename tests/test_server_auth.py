"""Who may do what on the local server, and how it answers odd credentials: a repeated
``Authorization`` is a 400 in the service's error shape on every endpoint (never a 500), the
server takes its own key whatever it looks like, ephemeral keys it minted open WebSocket
sessions and WebRTC calls and act only on their own call, and voxline's client sends one
``Authorization`` header even when the URL carries ``user:key@``."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from voxline.realtime.errors import ConnectionFailed
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.net.app import Server
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.realtime.transports.websocket import WebSocketTransport
from tests.support.cli import VOXLINE

KEY = "sk-auth-test-key-1234"
OTHER = "sk-auth-test-other-99"
SDP = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n"
       "a=mid:0\r\na=sendrecv\r\na=rtpmap:111 opus/48000/2\r\n")


@asynccontextmanager
async def local_server(**config: Any) -> AsyncIterator[Server]:
    async with serve(ServerConfig(**{"port": 0, "voice": "tone", "speed": math.inf, **config})) as server:
        yield server


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, Any] | None, bytes]:
    """Send raw bytes, read the answer: status, JSON body, body (a 101 upgrade has none)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    except asyncio.IncompleteReadError:
        raise AssertionError("the server dropped the request without an answer") from None
    status = int(head.split(b" ", 2)[1])
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    body = await asyncio.wait_for(reader.readexactly(length), 10) if status != 101 else b""
    writer.close()
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    return status, payload, body


def request(method: str, target: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", *(f"{n}: {v}" for n, v in headers)]
    if method != "GET":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


UPGRADE = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
           ("Sec-WebSocket-Version", "13")]


def endpoints(call_id: str = "rtc_none") -> dict[str, tuple[str, str, list[tuple[str, str]], bytes]]:
    """Every endpoint: method, target, the headers it needs besides Authorization, a body."""
    return {
        "websocket": ("GET", "/v1/realtime?model=gpt-realtime", UPGRADE, b""),
        "transcription": ("GET", "/v1/realtime?intent=transcription", UPGRADE, b""),
        "sideband": ("GET", f"/v1/realtime?call_id={call_id}", UPGRADE, b""),
        "client_secrets": ("POST", "/v1/realtime/client_secrets", [("Content-Type", "application/json")], b"{}"),
        "calls": ("POST", "/v1/realtime/calls", [("Content-Type", "application/sdp")], SDP.encode()),
        "hangup": ("POST", f"/v1/realtime/calls/{call_id}/hangup", [], b""),
    }


def assert_error_shape(payload: dict[str, Any] | None, body: bytes) -> dict[str, Any]:
    assert payload is not None and set(payload) == {"error"}, body
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str), body
    return error


# ---------------------------------------------------------------- a repeated Authorization header


@pytest.mark.parametrize("name", list(endpoints()))
@pytest.mark.parametrize("second", [KEY, OTHER, "Basic dXNlcjprZXk="], ids=["same", "other", "basic"])
async def test_a_repeated_authorization_is_a_400_in_the_error_shape_on_every_endpoint(name: str, second: str) -> None:
    async with local_server(api_key=KEY) as server:
        method, target, headers, body = endpoints()[name]
        value = second if second.startswith("Basic") else f"Bearer {second}"
        raw = request(method, target, [("Authorization", f"Bearer {KEY}"), ("Authorization", value), *headers], body)
        status, payload, text = await exchange(server.port, raw)
        assert status == 400, text
        error = assert_error_shape(payload, text)
        assert error["code"] == "duplicate_header" and error["param"] == "Authorization"
        assert KEY not in text.decode("latin-1")


@pytest.mark.parametrize("header", ["Content-Type", "Content-Length", "Host"])
async def test_a_repeated_body_or_host_header_is_a_400(header: str) -> None:
    async with local_server(api_key=KEY) as server:
        value = {"Content-Type": "application/json", "Content-Length": "2", "Host": "127.0.0.1"}[header]
        raw = request("POST", "/v1/realtime/client_secrets",
                      [("Authorization", f"Bearer {KEY}"), (header, value), (header, value)], b"{}")
        status, payload, text = await exchange(server.port, raw)
        assert status == 400, text
        assert assert_error_shape(payload, text)["code"] == "duplicate_header"
        if header == "Host":
            status, payload, text = await exchange(server.port, request(
                "GET", "/v1/realtime?model=m", [("Authorization", f"Bearer {KEY}"), ("Host", value), *UPGRADE]))
            assert status == 400 and assert_error_shape(payload, text)["param"] == "Host", text


async def test_a_repeated_authorization_in_band_closes_4000_with_the_error_event() -> None:
    from websockets.asyncio.client import connect

    async with local_server(api_key=KEY, reject_in_band=True) as server:
        headers = [("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {KEY}")]
        async with connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=headers) as ws:
            event = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert event["type"] == "error" and event["error"]["code"] == "duplicate_header"
            await asyncio.wait_for(ws.wait_closed(), 10)
            assert ws.close_code == 4000


ODD_AUTHORIZATION = [
    [],
    [("Authorization", "")],
    [("Authorization", "Bearer")],
    [("Authorization", "Bearer ")],
    [("Authorization", "bearer " + KEY)],
    [("Authorization", "Basic " + KEY)],
    [("Authorization", "Bearer " + KEY + " extra")],
    [("Authorization", "Bearer ek_not_minted_here_0000")],
    [("authorization", "Bearer " + KEY), ("AUTHORIZATION", "Bearer " + KEY)],
    [("Authorization", "Bearer " + KEY), ("Authorization", "")],
    [("Authorization", "Bearer " + KEY + ", Bearer " + OTHER)],
    [("Authorization", "Bearer \t" + KEY)],
]
ODD_OTHERS = [
    [],
    [("Content-Type", "")],
    [("Content-Type", "multipart/form-data")],
    [("Content-Type", "multipart/form-data; boundary=")],
    [("OpenAI-Beta", "realtime=v1"), ("OpenAI-Beta", "assistants=v2")],
    [("Host", "127.0.0.1")],
    [("Transfer-Encoding", "chunked")],
    [("X-Odd", "\x7f\x80\xff")],
    [("NoColonHeader", "")],
]


async def test_odd_header_combinations_never_get_a_5xx_on_any_endpoint() -> None:
    async with local_server(api_key=KEY) as server:
        for (name, (method, target, needed, body)), auth, others in itertools.product(
            endpoints().items(), ODD_AUTHORIZATION, ODD_OTHERS
        ):
            headers = [*auth, *[h for h in needed if h[0] != "Content-Type" or not others], *others]
            if others == [("NoColonHeader", "")]:
                raw = request(method, target, [*auth, *needed], body).replace(b"\r\n\r\n", b"\r\nNoColonHeader\r\n\r\n", 1)
            else:
                raw = request(method, target, headers, body)
            status, payload, text = await exchange(server.port, raw)
            assert status < 500, (name, auth, others, text)
            if status >= 400:
                assert_error_shape(payload, text)
            assert KEY not in text.decode("latin-1"), (name, auth, others)


@pytest.mark.parametrize("target", ["//[/v1/realtime?model=m", "/v1/realtime?model=m#[", "//[::1/x", "/%ff?model=\xff"])
async def test_odd_request_targets_never_get_a_5xx(target: str) -> None:
    async with local_server(api_key=KEY) as server:
        raw = request("GET", target, [("Authorization", f"Bearer {KEY}"), *UPGRADE])
        status, payload, text = await exchange(server.port, raw)
        assert status < 500, text
        if status >= 400:
            assert_error_shape(payload, text)


# ---------------------------------------------------------------- the server's own key and ephemeral keys


async def mint(port: int, key: str) -> str:
    raw = request("POST", "/v1/realtime/client_secrets",
                  [("Authorization", f"Bearer {key}"), ("Content-Type", "application/json")], b"{}")
    status, payload, text = await exchange(port, raw)
    assert status == 200, text
    assert payload is not None
    return str(payload["value"])


async def test_serve_takes_its_own_key_when_it_looks_ephemeral() -> None:
    own = "ek_configured_as_the_api_key_0001"
    async with local_server(api_key=own) as server:
        transport = await WebSocketTransport.connect(server.url, own, model="gpt-realtime")
        await transport.close()
        minted = await mint(server.port, own)
        assert minted != own
        transport = await WebSocketTransport.connect(server.url, minted, model="gpt-realtime")
        await transport.close()
        status, payload, text = await exchange(server.port, request(
            "POST", "/v1/realtime/client_secrets", [("Authorization", f"Bearer {minted}")], b"{}"))
        assert status == 401 and assert_error_shape(payload, text)["code"] == "invalid_api_key"
        # the service's code, in the local server's words: not "find your API key" on the user's OpenAI account page
        assert payload["error"]["message"] == ("Incorrect API key provided: this local server takes only the key it "
                                               "was started with (if any) or an unexpired ephemeral key it minted.")


@pytest.mark.parametrize("api_key", [KEY, None], ids=["with-key", "keyless"])
async def test_a_minted_key_opens_a_websocket_session_and_a_webrtc_call(api_key: str | None) -> None:
    async with local_server(api_key=api_key) as server:
        minted = await mint(server.port, api_key or "local")
        transport = await WebSocketTransport.connect(server.url, minted, model="gpt-realtime")
        await transport.close()
        call = await WebRTCTransport.connect(server.http_url, minted, model="gpt-realtime")
        try:
            assert call.call_id and server._calls.find(call.call_id) is not None
        finally:
            await call.close()


async def hangup(port: int, call_id: str, key: str) -> tuple[int, dict[str, Any] | None, bytes]:
    return await exchange(port, request("POST", f"/v1/realtime/calls/{call_id}/hangup",
                                        [("Authorization", f"Bearer {key}")]))


@pytest.mark.parametrize("api_key", [KEY, None], ids=["with-key", "keyless"])
async def test_an_ephemeral_key_acts_only_on_its_own_call(api_key: str | None) -> None:
    async with local_server(api_key=api_key) as server:
        mine, theirs = await mint(server.port, api_key or "local"), await mint(server.port, api_key or "local")
        first = await WebRTCTransport.connect(server.http_url, mine, model="gpt-realtime")
        second = await WebRTCTransport.connect(server.http_url, theirs, model="gpt-realtime")
        by_key = await WebRTCTransport.connect(server.http_url, api_key or "local", model="gpt-realtime")
        try:
            for call_id in (second.call_id, by_key.call_id):
                status, payload, text = await hangup(server.port, str(call_id), mine)
                assert status == 404, text
                assert assert_error_shape(payload, text)["code"] == "call_not_found"
                assert server._calls.find(str(call_id)) is not None  # still running
            # the sideband is for the API key: refused to any ephemeral key, even the call's own
            for call_id in (first.call_id, second.call_id):
                raw = request("GET", f"/v1/realtime?call_id={call_id}", [("Authorization", f"Bearer {mine}"), *UPGRADE])
                status, payload, text = await exchange(server.port, raw)
                assert status == 401 and assert_error_shape(payload, text)["code"] == "invalid_api_key"
            status, _payload, text = await hangup(server.port, str(first.call_id), mine)
            assert status == 200, text
            status, _payload, text = await hangup(server.port, str(second.call_id), api_key or "local")
            assert status == 200, text  # the API key hangs up any call
        finally:
            for call in (first, second, by_key):
                await call.close()


# ---------------------------------------------------------------- the client sends one Authorization header


@pytest.mark.parametrize("token", ["", KEY], ids=["key-from-url", "configured-key-wins"])
async def test_a_url_with_userinfo_gives_one_authorization_header(token: str) -> None:
    async with local_server(api_key=KEY) as server:
        userinfo = f"user:{KEY}" if not token else f"user:{OTHER}"
        url = server.url.replace("ws://", f"ws://{userinfo}@")
        transport = await WebSocketTransport.connect(url, token, model="gpt-realtime")
        try:
            assert "@" not in transport.url and KEY not in repr(transport)
        finally:
            await transport.close()
        call = await WebRTCTransport.connect(url, token, model="gpt-realtime")
        await call.close()


async def test_a_configured_key_wins_over_a_wrong_key_in_the_userinfo_and_is_refused_when_wrong() -> None:
    async with local_server(api_key=KEY) as server:
        url = server.url.replace("ws://", f"ws://user:{KEY}@")
        with pytest.raises(ConnectionFailed) as caught:
            await WebSocketTransport.connect(url, OTHER, model="gpt-realtime")
        assert "401" in str(caught.value) and KEY not in str(caught.value) and OTHER not in str(caught.value)


@pytest.mark.parametrize("drop", ["Upgrade", "Sec-WebSocket-Key", "Sec-WebSocket-Version"])
async def test_a_handshake_websockets_refuses_is_answered_in_the_error_shape(drop: str) -> None:
    async with local_server(api_key=KEY) as server:
        headers = [("Authorization", f"Bearer {KEY}"), *[h for h in UPGRADE if h[0] != drop]]
        status, payload, text = await exchange(server.port, request("GET", "/v1/realtime?model=m", headers))
        assert 400 <= status < 500, text
        assert_error_shape(payload, text)


# ---------------------------------------------------------------- the keyless loopback server says it is open


@pytest.mark.parametrize("api_key", [None, KEY], ids=["keyless", "with-key"])
def test_serve_says_when_any_local_user_can_use_it(api_key: str | None) -> None:
    args = [str(VOXLINE), "serve", "--port", "0", "--voice", "tone", *(["--api-key", api_key] if api_key else [])]
    env = {k: v for k, v in os.environ.items() if k != "VOXLINE_SERVE_API_KEY"}
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        assert "voxline local server at" in server.stdout.readline()
    finally:
        server.terminate()
        _out, err = server.communicate(timeout=30)
    said = "every user and program on this machine can use this server" in err
    assert said == (api_key is None), err


def test_live_ephemeral_keys_are_bounded_in_number_and_bytes_and_let_go_as_they_expire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every minted key was kept with its session until it expired, without bound: 800 mints of megabyte sessions
    grew the server by a gigabyte, and each mint copied the whole table (7.7 ms a mint at 26,000 live keys)."""
    from voxline.realtime.server.engine import http_api
    from voxline.realtime.server.engine.http_api import Credentials
    from voxline.realtime.server.engine.ids import IdFactory

    monkeypatch.setattr(http_api, "MAX_LIVE_KEYS", 3)
    monkeypatch.setattr(http_api, "MAX_HELD_BYTES", 1000)
    credentials = Credentials(KEY, IdFactory(1))
    keys = [credentials.mint(seconds, {"type": "realtime"}, 0.0, 10) for seconds in (30, 10, 20)]
    assert all(keys) and credentials.mint(60, {}, 0.0, 10) is None  # three live: the fourth waits
    assert credentials.mint(60, {}, 10.0, 10) is not None  # the 10 s one expired: its place is free
    assert credentials.session_for(keys[0][0], 10.0) is not None  # type: ignore[index]
    assert len(credentials._minted) == 3 and len(credentials._expiry) == 3
    assert credentials.mint(60, {}, 30.0, 995) is None  # two expired, but the bytes do not fit
    assert credentials.mint(60, {}, 30.0, 990) is not None and credentials._held == 1000


async def test_a_client_secret_past_the_live_keys_bound_is_a_429_in_the_services_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voxline.realtime.server.engine import http_api

    monkeypatch.setattr(http_api, "MAX_LIVE_KEYS", 2)
    async with local_server(api_key=KEY) as server:
        await mint(server.port, KEY)
        await mint(server.port, KEY)
        raw = request("POST", "/v1/realtime/client_secrets",
                      [("Authorization", f"Bearer {KEY}"), ("Content-Type", "application/json")], b"{}")
        status, payload, text = await exchange(server.port, raw)
    assert status == 429, text
    error = assert_error_shape(payload, text)
    assert error["code"] == "rate_limit_exceeded" and "try again in 600 s, when the next one expires" in error["message"]
    async with local_server(api_key=KEY) as server:  # the same bound, read whole for the answer's head
        await mint(server.port, KEY)
        await mint(server.port, KEY)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(raw)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
    assert b"\r\nRetry-After: 600\r\n" in head  # a key lives 600 s by default (the clock moved less than 1 s)


async def test_a_key_in_a_path_is_not_said_back_by_a_404() -> None:
    """``Unknown path /v1/realtime/calls/ek_…`` said a live minted key back, in the answer and to any log of it."""
    async with local_server(api_key=KEY) as server:
        minted = await mint(server.port, KEY)
        for target in (f"/v1/realtime/calls/{minted}/x", f"/v1/realtime/{KEY}", f"/v1/{minted}"):
            for method in ("POST", "GET"):
                raw = request(method, target, [("Authorization", f"Bearer {KEY}"), *(UPGRADE if method == "GET" else [])],
                              b"{}" if method == "POST" else b"")
                status, payload, body = await exchange(server.port, raw)
                assert status == 404, body
                assert minted.encode() not in body and KEY.encode() not in body and b"[redacted]" in body, body
