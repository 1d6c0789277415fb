"""``voxline serve`` and a real-time ``voxline replay`` against it, as a user runs them:
one default scenario said at start, no key for a loopback URL, lines printed as they happen,
Ctrl-C keeping what was heard so far, session logs, and connection errors that say what happened.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxline.realtime.transports.failures import connect_failure
from voxline.session.replay.result import ReplayLines
from voxline.session.events import AssistantAudioStarted
from tests.support.loopback_http import loopback_http

pytestmark = pytest.mark.slow  # real-time replays through the installed voxline command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "audio" / "barge_in.wav"
VOXLINE = Path(sys.executable).parent / "voxline"
KEY = "sk-live-test-key-never-logged"


def _env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    return {**clean, **extra}


@contextlib.contextmanager
def served(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``voxline serve --port 0`` running; yields it and the line it printed at start."""
    proc = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), preexec_fn=_ctrl_c_works)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "voxline local server at ws://" in first, first + (proc.stderr.read() if proc.stderr else "")
        yield proc, first
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ctrl_c_works() -> None:
    """In the child: SIGINT as a terminal delivers it (a shell's background job would ignore it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _url(banner: str) -> str:
    return banner.split(" at ", 1)[1].split()[0].removesuffix("/realtime")


def test_serve_and_fast_replay_say_the_same_default_scenario(tmp_path: Path) -> None:
    with served() as (_proc, banner):
        assert "scenario 'default'" in banner
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                          str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl")],
                         capture_output=True, text=True, timeout=180, env=_env())
    assert run.returncode == 0, run.stderr
    assert "scenario 'default'" in run.stderr.splitlines()[0]


def test_real_time_replay_on_a_loopback_server_prints_live_and_keeps_what_was_heard_at_ctrl_c(tmp_path: Path) -> None:
    heard, events = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    with served() as (server, banner):
        replay = subprocess.Popen([str(VOXLINE), "replay", str(EXAMPLE), "--url", _url(banner), "-v", "--out",
                                   str(heard), "--events", str(events)], cwd=ROOT, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),  # no OPENAI_API_KEY
                                  preexec_fn=_ctrl_c_works)
        assert replay.stdout is not None
        seen = []
        for line in replay.stdout:
            seen.append(line)
            if "barge-in" in line:
                # printed while the replay still runs: the input is 27 s long, the barge-in is at 6 s
                assert replay.poll() is None
                replay.send_signal(signal.SIGINT)
                break
        _out, err = replay.communicate(timeout=60)
        assert replay.returncode == 130, err
        assert any("you: started speaking" in line for line in seen), seen
    server_log = server.stderr.read() if server.stderr else ""
    assert "OPENAI_API_KEY" not in err
    with wave.open(str(heard)) as w:  # a complete WAV header, written up to the interrupt
        assert w.getframerate() == 24000 and 6.0 * 24000 < w.getnframes() < 20 * 24000
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert any(line["event"].get("type") == "BargeIn" for line in lines)
    times = [line["t_ms"] for line in lines]
    assert times == sorted(times) and times[-1] >= 6000
    assert "INFO voxline.realtime: connected to ws://127.0.0.1" in err
    opened = [line for line in server_log.splitlines() if "voxline.server: session" in line]
    assert len(opened) == 2 and "opened (WebSocket" in opened[0] and "closed (WebSocket" in opened[1], server_log


def test_a_key_never_reaches_the_logs(tmp_path: Path) -> None:
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--url", "ws://127.0.0.1:9/v1", "-vv",
                          "--out", str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl")],
                         capture_output=True, text=True, timeout=60, env=_env(OPENAI_API_KEY=KEY))
    assert run.returncode == 1
    assert "voxline.realtime: connect failed" in run.stderr and KEY not in run.stderr + run.stdout


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[int]:
    with loopback_http(_NotFound) as port:
        yield port


@pytest.mark.parametrize(("scheme", "expected"), [
    ("http", "HTTP 404 from ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime-2.1 — not a Realtime endpoint"),
    ("wss", "TLS handshake with 127.0.0.1 failed"),
])
def test_a_url_that_is_not_a_realtime_endpoint_is_named(tmp_path: Path, plain_http: int, scheme: str,
                                                        expected: str) -> None:
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--url", f"{scheme}://127.0.0.1:{plain_http}/v1",
                          "--out", str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl")],
                         capture_output=True, text=True, timeout=60, env=_env())
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1 and expected.format(port=plain_http) in lines[0], run.stderr


def test_dns_and_certificate_failures_are_named() -> None:
    url = "wss://realtime.example.invalid/v1/realtime"
    dns = connect_failure(url, socket.gaierror(-2, "Name or service not known"))
    assert dns == f"cannot connect to {url}: DNS cannot resolve realtime.example.invalid (Name or service not known)"
    cert = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cert.verify_message = "self-signed certificate"
    assert "TLS certificate of realtime.example.invalid not accepted (self-signed certificate)" in connect_failure(url, cert)
    refused = ConnectionRefusedError(111, "Connection refused")
    assert connect_failure(url, refused).endswith("connection refused (nothing listens there)")


def test_a_reply_heard_within_the_block_of_speech_stopped_is_not_a_negative_latency() -> None:
    line = ReplayLines().line(AssistantAudioStarted("item_a", 2.716, -0.004), 2.716)
    assert line is not None and "-" not in line.split("started speaking")[1] and "same 20 ms block" in line
    later = ReplayLines().line(AssistantAudioStarted("item_a", 2.74, 0.02), 2.74)
    assert later is not None and "20 ms after the server's speech_stopped" in later


def test_real_time_replay_on_a_terminal_shows_a_progress_line(tmp_path: Path) -> None:
    import pty

    master, slave = pty.openpty()
    replay = subprocess.Popen([str(VOXLINE), "replay", str(EXAMPLE), "--voice", "tone", "--out", str(tmp_path / "h.wav"),
                               "--events", str(tmp_path / "e.jsonl")], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                              stderr=slave, env=_env(), preexec_fn=_ctrl_c_works)
    os.close(slave)
    try:
        assert replay.stdout is not None
        for line in replay.stdout:
            if "you: started speaking" in line:
                break
        shown = b""
        while b"s of input" not in shown:
            shown += os.read(master, 4096)
        assert re.search(rb"\r  \xe2\x80\xa6 \d+ of 11 s of input", shown), shown
    finally:
        replay.send_signal(signal.SIGINT)
        replay.communicate(timeout=60)
        os.close(master)
