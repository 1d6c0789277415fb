"""The headless-Chromium driver on a tiny local page: JS, waits, console, screenshots, fake microphone, clean exit."""

from __future__ import annotations

import http.server
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.support.browser import BrowserError, JSError, SyncBrowser, launch
from tests.support.loopback_http import loopback_http
from tests.support.speech import write_wav

pytestmark = pytest.mark.slow

PAGE = b"""<!doctype html>
<html><head><title>driver check</title>
<style>body { margin: 0; background: rgb(10, 120, 200); }</style></head>
<body><p id="note">ready</p>
<script>
  console.log("hello", 42);
  console.warn("careful");
  window.later = false;
  setTimeout(() => { window.later = "done"; }, 300);
  setTimeout(() => { throw new Error("uncaught on purpose"); }, 50);
  async function level() {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const context = new AudioContext();
    const analyser = context.createAnalyser();
    context.createMediaStreamSource(stream).connect(analyser);
    const samples = new Float32Array(analyser.fftSize);
    window.peak = 0;
    setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      for (const s of samples) window.peak = Math.max(window.peak, Math.abs(s));
    }, 20);
    return stream.getAudioTracks().length;
  }
</script></body></html>"""


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _png_size_and_pixel(png: bytes) -> tuple[int, int, tuple[int, int, int]]:
    """Width, height and the first pixel of an 8-bit RGB(A) PNG, read with the standard library."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    data, at = b"", 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        if kind == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    raw = zlib.decompress(data)
    channels = 3 if colour == 2 else 4
    first = raw[1 : 1 + channels]  # row 0 after its filter byte: every filter leaves its first pixel as is
    return width, height, (first[0], first[1], first[2])


async def test_page_js_console_screenshot_and_clean_exit() -> None:
    with loopback_http(_Page) as port:
        async with launch(window_size=(640, 360)) as browser:
            profile = browser.profile
            assert profile.is_dir()
            page = await browser.new_page(f"http://127.0.0.1:{port}/")
            assert await page.evaluate("document.title") == "driver check"
            assert await page.evaluate("new Promise(r => setTimeout(() => r({a: [1, 2]}), 20))") == {"a": [1, 2]}
            assert await page.wait_for("window.later", timeout=5) == "done"
            with pytest.raises(JSError, match="nope"):
                await page.evaluate("Promise.reject(new Error('nope'))")
            with pytest.raises(BrowserError, match="never"):
                await page.wait_for("window.never", timeout=0.2)
            await page.wait_for("true")
            assert any(m.level == "log" and m.text == "hello 42" for m in page.console), page.console
            assert any(m.level == "warning" and m.text == "careful" for m in page.console), page.console
            assert any("uncaught on purpose" in e for e in page.exceptions), page.exceptions
            width, height, pixel = _png_size_and_pixel(await page.screenshot())
            assert (width, height) == (640, 360)
            assert pixel == (10, 120, 200)
            pid = browser.process.pid
    assert not profile.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_fake_microphone_plays_the_wav(tmp_path: Path) -> None:
    t = np.arange(24000 * 2) / 24000
    wav = write_wav(tmp_path / "tone.wav", 12000 * np.sin(2 * np.pi * 440 * t))
    with loopback_http(_Page) as port:
        async with launch(fake_audio=wav) as browser:
            page = await browser.new_page(f"http://127.0.0.1:{port}/")
            assert await page.evaluate("level()") == 1
            # 12000 / 32768 ≈ 0.37 full scale: the WAV, not the fake device's default beep or silence
            peak = await page.wait_for("window.peak > 0.3 && window.peak", timeout=10)
            assert peak < 0.45


def test_sync_wrapper(tmp_path: Path) -> None:
    with loopback_http(_Page) as port, SyncBrowser(window_size=(400, 300)) as browser:
        page = browser.new_page(f"http://127.0.0.1:{port}/")
        assert page.evaluate("document.getElementById('note').textContent") == "ready"
        assert page.wait_for("window.later", timeout=5) == "done"
        png = page.screenshot(tmp_path / "shot.png")
        assert (tmp_path / "shot.png").read_bytes() == png
        assert _png_size_and_pixel(png)[:2] == (400, 300)
