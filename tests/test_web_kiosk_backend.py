"""The browser kiosk's backend (examples/web_kiosk/backend.py) over HTTP and on its sideband, without a browser.

The local server holds the call; a VoiceSession over WebRTC plays the page's part (``run_tools=False``),
and the backend attaches to its call as the page would have it do.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

from voxline.realtime.server import ServerConfig, serve
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

from tests.support.half_open import half_open_relay
from tests.support.raw_http import exchange
from tests.support.web_kiosk import load_backend

KEY = "sk-web-kiosk-backend"
MODEL = "gpt-realtime-2.1"


def _ask(url: str, method: str = "POST", body: bytes | None = None) -> tuple[int, dict[str, Any], str | None]:
    """The status, JSON answer and ``Allow`` header a request gets."""
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status), json.loads(answer.read()), answer.headers.get("Allow")
    except urllib.error.HTTPError as refused:
        with refused:
            return int(refused.code), json.loads(refused.read()), refused.headers.get("Allow")


async def test_the_backend_reads_what_it_is_sent_and_answers_every_request_in_json() -> None:
    """It never read a request's body: a POST of 8 MB to /session had a key minted, then its sender got a broken pipe
    instead of an answer. A body is now read whole, and refused in JSON (too long, not a JSON object) before anything
    is minted; a method a path does not take is a JSON 405, not http.server's HTML 501 page."""
    example = load_backend()

    class Counted(example.Backend):  # type: ignore[name-defined,misc]
        minted = 0

        def mint(self) -> dict[str, Any]:
            self.minted += 1
            return super().mint()  # type: ignore[no-any-return]

    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY)) as server:
        backend = Counted(server.http_url, KEY, MODEL)
        async with example.running(backend) as page:
            session = f"{page}session"
            status, minted, _ = await asyncio.to_thread(_ask, session)  # as the page asks: no body
            assert status == 200 and minted["value"].startswith("ek_") and backend.minted == 1
            assert (await asyncio.to_thread(_ask, session, body=b'{"kiosk": "hall"}'))[0] == 200

            huge = await asyncio.to_thread(_ask, session, body=b"{" + b" " * (8 << 20) + b"}")
            assert huge == (413, {"error": f"a body of {(8 << 20) + 2} bytes; at most 16384"}, None)
            assert backend.minted == 2  # refused before a key was minted
            for body, said in ((b"{not json", "the body is not JSON: "), (b"[1, 2]", "the body is a JSON list")):
                status, answer, _ = await asyncio.to_thread(_ask, session, body=body)
                assert status == 400 and answer["error"].startswith(said), answer
            assert await asyncio.to_thread(_ask, f"{page}calls/rtc_1", body=b"\xff") == (
                400, {"error": "the body is not JSON: 'utf-8' codec can't decode byte 0xff in position 0: invalid "
                               "start byte"}, None)
            assert backend.minted == 2 and backend.status()["calls"] == []

            for method, path, allow in (("GET", "session", "POST"), ("PUT", "calls/rtc_1", "POST"),
                                        ("POST", "status", "GET"), ("DELETE", "", "GET")):
                status, answer, allowed = await asyncio.to_thread(_ask, f"{page}{path}", method)
                assert (status, allowed) == (405, allow) and answer["error"].endswith(f"takes {allow}, not {method}")
            assert (await asyncio.to_thread(_ask, f"{page}nope", "PATCH"))[:2] == (404, {"error": "no such page /nope"})
            port = int(page.rstrip("/").rsplit(":", 1)[1])
            brewed = await exchange(port, b"BREW /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert brewed[:2] == (501, {"error": "Unsupported method ('BREW')"}), brewed
            negative = await exchange(port, b"POST /session HTTP/1.1\r\nContent-Length: -1\r\n\r\n")
            assert negative[:2] == (400, {"error": "a body needs a Content-Length, not '-1'"}), negative
    assert backend.minted == 2


async def test_the_backend_forgets_a_call_once_its_sideband_ended() -> None:
    """Every call id posted stayed in the backend's table of attaches for good, those refused as unknown too: a
    kiosk running for weeks held one entry per call it ever had, and anyone could add more."""
    example = load_backend()
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY)) as server:
        backend = example.Backend(server.http_url, KEY, MODEL)
        async with example.running(backend) as page:
            kiosk_settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=0)
            async with VoiceSession(kiosk_settings, run_tools=False) as kiosk:
                call = kiosk.call_id
                assert (await asyncio.to_thread(_ask, f"{page}calls/{call}"))[:2] == (200, {"attached": call})
                assert (await asyncio.to_thread(_ask, f"{page}calls/rtc_nope"))[0] == 404
                await kiosk.aclose()  # the call ends, and with it the backend's sideband
                async with asyncio.timeout(20):
                    while backend.status()["ended"] != [call]:
                        await asyncio.sleep(0.05)
            assert backend._attached == {}
            assert (await asyncio.to_thread(_ask, f"{page}calls/{call}"))[0] == 404  # asked again: no such call


async def test_the_backends_sideband_survives_a_dropped_connection() -> None:
    """The backend attached with reconnect_attempts=0: the first drop of its sideband's connection (a network blip)
    ended it, and the call's tools never ran again. It keeps the default budget now: a call that ended is refused at
    the first try anyway (404)."""
    example = load_backend()
    opened: list[str] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and json.loads(text)["type"] == "session.created":
            opened.append(text)

    config = ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY, scenario="tools", on_wire=on_wire)
    async with serve(config) as server, half_open_relay(int(server.http_url.split(":")[2].split("/")[0])) as (
            relay, port):
        backend = example.Backend(f"http://127.0.0.1:{port}/v1", KEY, MODEL)  # its sideband through the relay
        kiosk_settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc", reconnect_attempts=0)
        async with VoiceSession(kiosk_settings, run_tools=False) as kiosk:
            await backend.attach(kiosk.call_id)
            assert len(opened) == 2  # the kiosk's session, and the sideband's
            relay.cut()
            async with asyncio.timeout(20):  # attached again, or given up
                while len(opened) < 3 and not backend.status()["ended"]:
                    await asyncio.sleep(0.05)
            assert backend.status()["ended"] == []
            await kiosk.send_text("What is the weather in Paris?")
            async with asyncio.timeout(20):
                while not backend.status()["tool_runs"]:
                    await asyncio.sleep(0.05)
        await backend.aclose()
    assert [(run["name"], run["ok"]) for run in backend.status()["tool_runs"]] == [("get_weather", True)]
    assert backend.status()["calls"] == [kiosk.call_id]


def test_the_backends_status_keeps_the_newest_calls_only() -> None:
    """Its lists of calls, ended calls and tool runs grew by one entry a call for as long as the kiosk ran."""
    example = load_backend()
    backend = example.Backend("http://127.0.0.1:9/v1", KEY, MODEL)
    for k in range(example.STATUS_KEEPS + 50):
        backend.calls.append(f"rtc_{k}")
        backend.ended.append(f"rtc_{k}")
        backend.tool_runs.append({"call": f"rtc_{k}"})
    status = backend.status()
    newest = [f"rtc_{k}" for k in range(50, example.STATUS_KEEPS + 50)]
    assert status["calls"] == status["ended"] == newest
    assert [run["call"] for run in status["tool_runs"]] == newest
