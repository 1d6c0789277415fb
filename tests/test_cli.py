"""The ``voxline`` command line as a user runs it: the replay contract and one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import read_wav
from tests.support.ci import require_tool
from tests.support.cli import EXAMPLE, one_line_error, voxline

pytestmark = pytest.mark.slow  # each test runs the installed voxline command

ROOT = Path(__file__).resolve().parent.parent


def test_fast_replay_writes_heard_audio_and_the_event_log(tmp_path: Path) -> None:
    require_tool("espeak-ng")
    out, log = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(out), "--events", str(log))
    assert run.returncode == 0, run.stderr
    assert "barge-in (server_vad): the reply cut where it was heard" in run.stdout
    with wave.open(str(out)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
    heard, _rate = read_wav(out)
    assert len(heard) >= len(read_wav(EXAMPLE)[0])
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["dir"] for line in lines} == {"in", "out", "local"}
    assert all(set(line) == {"t_ms", "dir", "event"} for line in lines)
    times = [line["t_ms"] for line in lines]
    assert times == sorted(times)  # every line, local decisions included, in time order
    deltas_at = [line["t_ms"] for line in lines if line["event"].get("type") == "TranscriptDelta"]
    assert deltas_at and deltas_at[-1] - deltas_at[0] > 1000  # stamped as they came, not all at the end
    started = [line for line in lines if line["event"].get("type") == "AssistantAudioStarted"]
    assert started and all(abs(line["t_ms"] - line["event"]["at"] * 1000) < 1 for line in started)
    deltas = [line["event"] for line in lines if line["event"].get("type") == "response.output_audio.delta"]
    assert deltas and all(d["delta"].endswith("bytes of audio>") for d in deltas)
    appends = [line["event"] for line in lines if line["event"].get("type") == "input_audio_buffer.append"]
    assert appends and all(a["audio"].endswith("bytes of audio>") for a in appends)
    (truncate,) = [line["event"] for line in lines if line["event"].get("type") == "conversation.item.truncate"]
    (barge,) = [line["event"] for line in lines if line["event"].get("type") == "BargeIn"]
    assert barge["audio_end_ms"] == truncate["audio_end_ms"]
    assert np.abs(heard).max() > 0


def test_a_wav_at_another_rate_is_resampled(tmp_path: Path) -> None:
    require_tool("sox")
    src = tmp_path / "in16k.wav"
    subprocess.run(["sox", "-D", str(EXAMPLE), "-r", "16000", str(src)], check=True)
    run = voxline("replay", str(src), "--fast", "--voice", "tone", "--out", str(tmp_path / "h.wav"),
                  "--events", str(tmp_path / "e.jsonl"))
    assert run.returncode == 0, run.stderr
    assert "resampling" in run.stderr and "barge-in" in run.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["replay", "missing.wav", "--out", "h.wav", "--events", "e.jsonl"], "cannot read missing.wav"),
        (["replay", "README.md", "--out", "h.wav", "--events", "e.jsonl"], "not a WAV file"),
        (["replay", str(EXAMPLE), "--fast", "--url", "ws://127.0.0.1:9/v1", "--out", "h.wav", "--events", "e.jsonl"],
         "--fast runs against the built-in server only"),
        (["replay", str(EXAMPLE), "--url", "ws://127.0.0.1:9/v1", "--out", "h.wav", "--events", "e.jsonl"],
         "cannot connect"),
        (["replay", str(EXAMPLE), "--transport", "carrier-pigeon", "--out", "h.wav", "--events", "e.jsonl"],
         "invalid choice"),
        (["replay", str(EXAMPLE), "--fast", "--out", "/nonexistent/dir/h.wav", "--events", "e.jsonl"],
         "no such directory /nonexistent/dir"),
        (["serve", "--host", "0.0.0.0"], "requires an API key"),
        (["serve", "--port", "http"], "expected a port number 0..65535, not 'http'"),
        (["nonsense"], "invalid choice"),
        (["token"], "nor OPENAI_API_KEY is set"),
        (["token", "--url", "ftp://user:sk-test-not-a-real-key@x/v1"],
         "--url must be an http(s):// or ws(s):// URL"),  # the flag's mistake, though no key is set either
    ],
)
def test_user_mistakes_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}
    if args[0] == "token":
        env = {"OPENAI_API_KEY": ""}
    args = [str(tmp_path / a) if a in ("h.wav", "e.jsonl") else a for a in args]
    line = one_line_error(voxline(*args, env=env, timeout=60))
    assert expected in line
    assert "sk-test-not-a-real-key" not in line


def test_a_refused_token_is_one_line(tmp_path: Path) -> None:
    code = (
        "import asyncio, subprocess, sys\n"
        "from voxline.realtime.server import ServerConfig, serve\n"
        "async def main():\n"
        "    async with serve(ServerConfig(port=0, voice='tone', api_key='sk-right')) as s:\n"
        "        r = await asyncio.to_thread(subprocess.run, [sys.executable, '-m', 'voxline', 'replay',\n"
        f"            {str(EXAMPLE)!r}, '--url', s.url, '--out', {str(tmp_path / 'h.wav')!r},\n"
        f"            '--events', {str(tmp_path / 'e.jsonl')!r}], capture_output=True, text=True)\n"
        "        print(r.returncode); print(r.stderr.strip())\n"
        "asyncio.run(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OPENAI_API_KEY": "sk-wrong-key-value"})
    rc, *err = run.stdout.strip().splitlines()
    assert rc == "1" and len(err) == 1 and "HTTP 401" in err[0] and "sk-wrong" not in err[0]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_real_time_replay_over_webrtc(tmp_path: Path, loop: str) -> None:
    require_tool("espeak-ng")
    out, log = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    run = voxline("-vv", "replay", str(EXAMPLE), "--transport", "webrtc", "--out", str(out), "--events", str(log),
                  env={"VOXLINE_EVENT_LOOP": loop})
    assert run.returncode == 0, run.stderr
    assert f"event loop: {loop}" in run.stderr
    assert "the server cuts its own buffer (WebRTC)" in run.stdout
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    kinds = [e.get("type") for e in events]
    assert "input_audio_buffer.append" not in kinds and "response.output_audio.delta" not in kinds
    assert "output_audio_buffer.started" in kinds and "conversation.item.truncated" in kinds
    assert "conversation.item.truncate" not in kinds  # over WebRTC the client never truncates
    heard, _ = read_wav(out)
    assert np.abs(heard[24_000 * 3 : 24_000 * 5]).max() > 1000  # the reply reached the listener
    # the user's voice is placed where the recording has it (0.50 s and 6.00 s, as over a WebSocket): the
    # microphone track sends nothing before the first block, and late blocks count from when they were captured
    began = [float(x) for x in re.findall(r"your voice began at (\d+\.\d+) s", run.stdout)]
    assert began == pytest.approx([0.50, 6.00], abs=0.015), run.stdout


def test_real_time_replay_over_a_websocket_on_uvloop_cuts_where_the_listener_was(tmp_path: Path) -> None:
    require_tool("espeak-ng")
    out, log = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    run = voxline("-vv", "replay", str(EXAMPLE), "--out", str(out), "--events", str(log),
                  env={"VOXLINE_EVENT_LOOP": "uvloop"})
    assert run.returncode == 0, run.stderr
    assert "event loop: uvloop" in run.stderr
    assert "barge-in (server_vad): the reply cut where it was heard" in run.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (truncate,) = [line["event"] for line in lines if line["event"].get("type") == "conversation.item.truncate"]
    (barge,) = [line["event"] for line in lines if line["event"].get("type") == "BargeIn"]
    assert barge["audio_end_ms"] == truncate["audio_end_ms"] > 0
    heard, _ = read_wav(out)
    assert np.abs(heard[24_000 * 3 : 24_000 * 5]).max() > 1000  # the reply reached the listener


def test_ctrl_c_while_the_command_line_loads_is_one_line_and_130() -> None:
    # a Ctrl-C that lands inside an import of the command line (it takes a moment to load)
    code = (
        "import sys\n"
        "class Interrupted:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'voxline.session.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupted())\n"
        "from voxline.console import main\n"
        "sys.exit(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr) == (130, "voxline: interrupted\n")


def test_token_takes_the_url_serve_prints_and_a_local_server_needs_no_key() -> None:
    from tests.support.cli import VOXLINE

    server = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        url = re.search(r"at (ws://\S+/v1/realtime) ", banner)
        assert url is not None, banner
        no_key = {"OPENAI_API_KEY": "", "VOXLINE_API_KEY": "", "VOXLINE_URL": "", "OPENAI_BASE_URL": ""}
        minted = voxline("token", "--url", url.group(1), env=no_key, timeout=60)  # as serve printed it
        assert minted.returncode == 0, minted.stderr
        assert json.loads(minted.stdout)["value"].startswith("ek_")
    finally:
        server.terminate()
        server.wait(timeout=20)


def _replay_against(server_code: str, tmp_path: Path, recording: Path = EXAMPLE,
                    *more: str, together: bool = False) -> subprocess.CompletedProcess[str]:
    """``voxline replay`` of ``recording`` (``more`` flags) against the server ``server_code`` starts (an async
    context manager expression with ``.url``), from a helper process that stops the server afterwards; its exit
    status, then its stderr (``together``: its stdout and stderr, both on one pipe, as on one terminal)."""
    streams = "stdout=subprocess.PIPE, stderr=subprocess.STDOUT" if together else "capture_output=True"
    code = (
        "import asyncio, subprocess, sys\n"
        "from voxline.realtime.server import ServerConfig, serve\n"
        "from tests.support.silent_server import refusing, silent\n"
        "async def main():\n"
        f"    async with {server_code} as s:\n"
        "        r = await asyncio.to_thread(subprocess.run, [sys.executable, '-m', 'voxline', 'replay',\n"
        f"            {str(recording)!r}, '--url', s.url, '--out', {str(tmp_path / 'h.wav')!r},\n"
        f"            '--events', {str(tmp_path / 'e.jsonl')!r}, *{list(more)!r}], {streams}, text=True)\n"
        f"        print(r.returncode); sys.stdout.write(r.{'stdout' if together else 'stderr'})\n"
        "asyncio.run(main())\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENAI_API_KEY": "sk-test"})


@pytest.mark.slow
def test_a_replay_whose_session_ends_with_a_fatal_error_fails_without_blaming_the_recording(tmp_path: Path) -> None:
    run = _replay_against("serve(ServerConfig(port=0, voice='tone', max_session_s=1.0))", tmp_path)
    rc, *err = run.stdout.strip().splitlines()
    assert rc == "1", run.stdout + run.stderr
    assert err[-1].startswith("voxline replay: error: the session ended with a fatal error: ")
    assert err[-1].endswith("; what was heard until then is written")
    assert not any("no speech detected" in line for line in err)
    assert wave.open(str(tmp_path / "h.wav")).getnframes() > 0


@pytest.mark.slow
def test_a_replay_against_a_server_that_never_speaks_fails(tmp_path: Path) -> None:
    run = _replay_against("silent()", tmp_path)
    rc, *err = run.stdout.strip().splitlines()
    assert rc == "1", run.stdout + run.stderr
    assert err[-1] == ("voxline replay: error: the server accepted the connection but never sent an event "
                       "(not even session.created)")
    assert not any("no speech detected" in line for line in err)


@pytest.mark.slow
@pytest.mark.parametrize("close", [True, False], ids=["error and close", "error alone"])
def test_a_replay_whose_server_refuses_every_connect_fails_naming_the_refusal(tmp_path: Path, close: bool) -> None:
    """A server that answers each connect with an error (and a close), never session.created: the replay
    (reconnected and) said the recording was silent ("no speech detected") and exited 0, its summary's checks
    passing, when the recording was over before the reconnect budget was spent."""
    from tests.support.hostile import speech
    from voxline.audio.wavio import write_wav

    recording = tmp_path / "short.wav"
    write_wav(recording, np.concatenate([speech(np.random.default_rng(3), 1.2), np.zeros(7200, np.int16)]))
    summary = tmp_path / "s.json"
    run = _replay_against(f"refusing(close={close})", tmp_path, recording, "--summary", str(summary))
    rc, *err = run.stdout.strip().splitlines()
    assert rc == "1", run.stdout + run.stderr
    assert err[-1].startswith("voxline replay: error: the server never opened a session (no session.created on "), err
    assert "it said server: your key [redacted] is not allowed here (not_allowed)" in err[-1]
    assert ("it closed the connection (1008 not allowed)" in err[-1]) == close
    assert err[-1].endswith(f"; what it said is in {tmp_path / 'e.jsonl'}")
    assert "sk-refused" not in run.stdout and "[redacted]" in err[-1]
    assert not any("no speech detected" in line for line in err), err
    written = json.loads(summary.read_text())
    assert written["pass"] is False
    assert any(not c["ok"] and "never opened a session" in c.get("detail", "") + c["name"] for c in written["checks"])


@pytest.mark.slow
def test_a_replay_whose_transcript_and_log_share_a_terminal_says_each_drop_once(tmp_path: Path) -> None:
    """On one terminal each drop and reconnect was said twice: the transcript's line, and a WARNING (or ERROR) record
    of the log saying the same, with its time stamp."""
    from tests.support.hostile import speech
    from voxline.audio.wavio import write_wav

    recording = tmp_path / "short.wav"
    write_wav(recording, np.concatenate([speech(np.random.default_rng(3), 1.2), np.zeros(7200, np.int16)]))
    run = _replay_against("refusing(close=True)", tmp_path, recording, together=True)
    rc, *lines = run.stdout.strip().splitlines()
    assert rc == "1", run.stdout + run.stderr
    assert any("connection lost (code 1008, not allowed); reconnecting" in line for line in lines), lines
    assert not any(" WARNING voxline." in line or " ERROR voxline." in line for line in lines), lines
    assert lines[-1].startswith("voxline replay: error: the server never opened a session"), lines


def test_the_length_printed_is_the_heard_wavs_whole_last_block_included(tmp_path: Path) -> None:
    recording = tmp_path / "odd.wav"
    with wave.open(str(recording), "wb") as w:  # 3 s of silence at 8 kHz, in stereo: the replay ends with the input
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(np.zeros(2 * 24_000, "<i2").tobytes())
    heard = tmp_path / "heard.wav"
    run = voxline("replay", str(recording), "--fast", "--voice", "tone", "--out", str(heard),
                  "--events", str(tmp_path / "e.jsonl"))
    assert run.returncode == 0, run.stderr
    printed = re.search(r"wrote \S+heard\.wav \((\d+\.\d\d) s\)", run.stdout)
    assert printed is not None, run.stdout
    with wave.open(str(heard)) as w:
        assert float(printed.group(1)) == round(w.getnframes() / w.getframerate(), 2)


def test_token_with_no_key_against_a_server_that_asks_for_one_says_none_was_given() -> None:
    from tests.support.cli import VOXLINE

    server = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone", "--api-key", "sk-serve-key"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = re.search(r"at (ws://\S+/v1/realtime) ", server.stdout.readline())
        assert url is not None
        no_key = {"OPENAI_API_KEY": "", "VOXLINE_API_KEY": "", "VOXLINE_URL": "", "OPENAI_BASE_URL": ""}
        line = one_line_error(voxline("token", "--url", url.group(1), env=no_key, timeout=60))
        assert "this server asks for an API key, and neither VOXLINE_API_KEY nor OPENAI_API_KEY is set" in line
        assert "the token was refused" not in line
        # a key in the URL, refused or to a path with no endpoint: one line (it was a traceback: the redacted
        # URL, http://[redacted]@…, was parsed again and read as an IPv6 host), the key in none of it
        base = url.group(1).replace("ws://", "http://").removesuffix("/realtime")
        for given, said in ((base.replace("http://", "http://user:sk-wrong-key-123@"), "HTTP 401"),
                            (base.replace("http://", "http://user:sk-serve-key@").removesuffix("/v1"), "HTTP 404")):
            line = one_line_error(voxline("token", "--url", given, env=no_key, timeout=60))
            assert line.startswith("voxline token: error: client secret refused: " + said) and "sk-" not in line, line
    finally:
        server.terminate()
        server.wait(timeout=20)
