"""The browser kiosk (examples/web_kiosk/) in real headless Chromium against ``voxline serve``.

Chromium's fake microphone plays a WAV: a question, then, while the assistant's weather report
plays, an interruption. The page opens the WebRTC call with an ephemeral key from the example's
backend, which attaches to the call's sideband and runs the tool.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import launch, require_chromium
from tests.support.ci import ROOT, require_tool
from tests.support.cli import VOXLINE
from tests.support.speech import make_utterance, mix_timeline, write_wav
from tests.support.web_kiosk import KIOSK, load_backend

KEY = "sk-local-web-kiosk-test"
QUESTION_AT_S = 3.0  # into the fake microphone's file, which starts when the page asks for the microphone
INTERRUPTION_AT_S = 10.5  # the weather report plays from about 6.5 s to 15.5 s of it


@asynccontextmanager
async def voxline_serve() -> AsyncIterator[str]:
    """``voxline serve`` with the kiosk's scenario on a free port; yields its HTTP base URL."""
    env = {**os.environ, "VOXLINE_API_KEY": KEY}
    process = await asyncio.create_subprocess_exec(
        str(VOXLINE), "serve", "--port", "0", "--voice", "tone", "--scenario", str(KIOSK / "scenario.toml"),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            banner = (await process.stdout.readline()).decode()
        match = re.search(r"ws://(\S+?)/v1/realtime", banner)
        assert match is not None, banner
        yield f"http://{match.group(1)}/v1"
    finally:
        process.terminate()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


@pytest.mark.slow
async def test_the_browser_kiosk_runs_the_tool_once_and_captions_only_what_was_heard(tmp_path: Path) -> None:
    require_chromium()
    require_tool("espeak-ng")
    cache = tmp_path / "speech"
    question = make_utterance("What is the weather in Paris?", cache)
    interruption = make_utterance("Wait, stop please.", cache)
    microphone = write_wav(
        tmp_path / "visitor.wav",
        mix_timeline(40.0, [(QUESTION_AT_S, question.samples), (INTERRUPTION_AT_S, interruption.samples)]),
    )
    example = load_backend()
    async with voxline_serve() as api_url:
        backend = example.Backend(api_url, KEY, "gpt-realtime-2.1")
        async with example.running(backend) as page_url:
            # --mute-audio: the reply is decoded and played out, but not into the machine's sound server
            async with launch(fake_audio=microphone, loop_audio=False, extra_flags=["--mute-audio"]) as browser:
                page = await browser.new_page(page_url)
                call_id = await page.evaluate("kiosk.start()", timeout=30)
                assert isinstance(call_id, str) and call_id.startswith("rtc_")
                await page.wait_for("kiosk.snapshot().phase === 'live'", timeout=15)
                assert backend.status()["calls"] == [call_id]  # attached before the visitor speaks
                # asked again (a retry, a double click), the backend keeps its one sideband: a second would run
                # the tool twice; a call the server does not know is a 404
                again = await page.evaluate(f"fetch('/calls/{call_id}', {{method: 'POST'}}).then(r => r.status)")
                unknown = await asyncio.to_thread(_post_status, f"{page_url.rstrip('/')}/calls/rtc_nope")
                assert (again, unknown, backend.status()["calls"]) == (200, 404, [call_id])
                minted = await page.evaluate("fetch('/session', {method: 'POST'}).then(r => r.json())")
                assert minted["value"].startswith("ek_") and KEY not in str(minted)  # the page never holds the key

                # live: while the report plays, its caption is a growing part of a transcript already whole
                live = await page.wait_for(
                    "kiosk.snapshot().captions.find(c => !c.cut && c.full_text.endsWith('dry and mild.')"
                    " && c.shown.startsWith('In Paris') && c.shown.length < c.full_text.length - 20)",
                    timeout=45,
                )
                assert live["full_text"].startswith(live["shown"])
                # the interrupted report, then the short reply to the interruption, played out in full
                await page.wait_for("kiosk.snapshot().captions.some(c => c.cut)", timeout=45)
                await page.wait_for("kiosk.snapshot().responses.filter(r => r.complete).length >= 2", timeout=30)
                snapshot: dict[str, Any] = await page.evaluate("kiosk.snapshot()")
                await page.screenshot(tmp_path / "web_kiosk.png")
                await page.evaluate("kiosk.hangup()")
                console_errors = [m for m in page.console if m.level == "error"]
                assert console_errors == [] and page.exceptions == [], (console_errors, page.exceptions)
                # the page's hang-up reaches the server: the call ends, and with it the backend's sideband
                async with asyncio.timeout(15):
                    while backend.status()["ended"] != [call_id]:
                        await asyncio.sleep(0.1)

    # The tool ran exactly once, on the backend, through the sideband; the page saw its answer.
    runs = backend.status()["tool_runs"]
    assert [(run["name"], run["ok"], run["call"]) for run in runs] == [("get_weather", True, call_id)]
    assert snapshot["tools"] == [{"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}',
                                  "answered": True}]

    # The spoken interruption stopped the report: its audio was cleared, never played to its end.
    cut = [c for c in snapshot["captions"] if c["cut"]]
    assert len(cut) == 1, snapshot["captions"]
    report = cut[0]
    state = {r["id"]: r for r in snapshot["responses"]}[report["response_id"]]
    assert state["cut"] and not state["complete"], state
    assert snapshot["events"].count("output_audio_buffer.cleared") == 1

    # The caption holds what was heard: a word-end prefix of the report, in proportion to the
    # audio played, which the page measured itself and the server's truncation confirms.
    full, shown = report["full_text"], report["shown"]
    assert full.startswith("In Paris it is twenty one degrees"), full
    assert shown and full.startswith(shown) and len(shown) < len(full) - 20, (shown, full)
    assert (len(full) == len(shown)) or full[len(shown)] == " "
    server_cut_ms, played_ms, item_ms = report["server_cut_ms"], report["played_ms"], report["item_ms"]
    assert 500 < server_cut_ms < item_ms - 1000, report
    assert abs(played_ms - server_cut_ms) < 400, report  # the page's own clock agrees with the server's cut
    heard_chars = len(full) * min(played_ms, server_cut_ms) / item_ms
    assert heard_chars - 16 <= len(shown) <= heard_chars, (report, heard_chars)

    # Replies played in full are captioned in full.
    complete = [c for c in snapshot["captions"] if not c["cut"]]
    assert [c["shown"] for c in complete] == ["One moment, let me look that up.", "Of course, go ahead."]
    assert (tmp_path / "web_kiosk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _post_status(url: str) -> int:
    """The status a POST to the backend gets (outside the page, whose console would log a 404 as an error)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


REPORT = "In Paris it is twenty one degrees and clear right now."


def _reply_events(response_id: str, item_id: str, text: str, audio_tokens: int) -> list[dict[str, Any]]:
    """A spoken reply as the data channel carries it: the item, its transcript in pieces, its end."""
    words = text.split(" ")
    deltas = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return [
        {"type": "response.output_item.added", "response_id": response_id,
         "item": {"id": item_id, "type": "message"}},
        *({"type": "response.output_audio_transcript.delta", "response_id": response_id, "item_id": item_id,
           "delta": d} for d in deltas),
        {"type": "response.done", "response": {"id": response_id, "status": "completed",
                                               "usage": {"output_token_details": {"audio_tokens": audio_tokens}}}},
    ]


@pytest.mark.slow
async def test_captions_follow_playback_and_stop_at_the_cut() -> None:
    """The caption logic on its own: server events fed to the page, no call."""
    example = load_backend()
    async with example.running(example.Backend("http://127.0.0.1:9/v1", "sk-unused", "m")) as page_url:
        async with launch() as browser:
            page = await browser.new_page(page_url)

            async def feed(*events: dict[str, Any]) -> dict[str, Any]:
                for event in events:
                    await page.evaluate(f"kiosk.receive({json.dumps(event)})")
                snapshot: dict[str, Any] = await page.evaluate("kiosk.snapshot()")
                return {c["item_id"]: c for c in snapshot["captions"]}

            # written ahead of the speech: nothing is shown before the audio plays
            captions = await feed(*_reply_events("resp_1", "item_1", REPORT, audio_tokens=80))  # 4 s of audio
            assert captions["item_1"]["shown"] == "…" and captions["item_1"]["full_text"] == REPORT
            # playing: a growing part; cut by the visitor 1.1 s in, the server's cut caps the page's clock
            await feed({"type": "output_audio_buffer.started", "response_id": "resp_1"})
            await page.wait_for("kiosk.snapshot().captions[0].played_ms > 1500", timeout=10)
            captions = await feed(
                {"type": "output_audio_buffer.cleared", "response_id": "resp_1"},
                {"type": "conversation.item.truncated", "item_id": "item_1", "content_index": 0, "audio_end_ms": 1100},
            )
            # 1100 / 4000 of 55 characters = 15.1: "In Paris it is " ends at 15, a word end
            assert captions["item_1"]["shown"] == "In Paris it is" and captions["item_1"]["cut"]
            assert await page.evaluate("document.querySelector('li.assistant.cut').textContent") == "In Paris it is"

            # played to its end: all of it
            await feed(*_reply_events("resp_2", "item_2", "Of course, go ahead.", audio_tokens=30))
            captions = await feed({"type": "output_audio_buffer.started", "response_id": "resp_2"},
                                  {"type": "output_audio_buffer.stopped", "response_id": "resp_2"})
            assert captions["item_2"]["shown"] == "Of course, go ahead." and not captions["item_2"]["cut"]

            # a reply with no audio at all (text only) is there to read at once
            captions = await feed(*_reply_events("resp_3", "item_3", "Here is the text.", audio_tokens=0))
            assert captions["item_3"]["shown"] == "Here is the text."
            assert page.exceptions == []
