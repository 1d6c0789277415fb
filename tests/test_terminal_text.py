"""What a server writes reaches the terminal as text, never as control sequences: a transcript, an
error message or a close reason with an escape sequence, a carriage return or a bell in it is
printed with those characters shown as escapes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from voxline.base.shown import printable
from voxline.session.cli.farm_progress import FarmProgress
from voxline.session.events import ConnectionLost, SessionError, TranscriptDone
from voxline.session.replay.farm import Outcome
from voxline.session.report.lines import EventLines
from tests.support.cli import EXAMPLE

HOSTILE = "ok\x1b[2J\x1b[31mPWNED\x1b]0;title\x07\r\x08X\u202eevil"
SHOWN = "ok\\x1b[2J\\x1b[31mPWNED\\x1b]0;title\\x07\\x0d\\x08X\\u202eevil"


def test_control_characters_are_shown_as_escapes() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("plain text, ünïcödé, 日本語") == "plain text, ünïcödé, 日本語"
    assert all(ord(c) >= 0x20 for c in printable("".join(map(chr, range(0x100)))))


def test_the_session_lines_show_what_a_server_wrote_as_text() -> None:
    lines = EventLines()
    for event in (TranscriptDone("assistant", "item_1", HOSTILE), SessionError(f"server: {HOSTILE}"),
                  ConnectionLost(4000, HOSTILE, 1.0)):
        line = lines.line(event)
        assert line is not None and "\x1b" not in line and "\r" not in line and "\x07" not in line, line
        assert "PWNED" in line


def test_a_farms_verdict_line_shows_a_quoted_server_error_as_text() -> None:
    out = io.StringIO()
    progress = FarmProgress(1, out=out, tty=False)
    progress.finished(Outcome("a", "a.wav", "error", error=f"cannot connect: HTTP 500 {HOSTILE}"))
    assert "\\x1b[2J" in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_close_reason_with_control_characters_is_one_printable_error_line(tmp_path: Path) -> None:
    reason = "bye\x1b[2J\x1b]0;pwned\x07\rnow"
    code = (
        "import asyncio, subprocess, sys\n"
        "from websockets.asyncio.server import serve\n"
        "async def refuse(ws):\n"
        f"    await ws.close(4000, {reason!r})\n"
        "async def main():\n"
        "    async with serve(refuse, '127.0.0.1', 0) as s:\n"
        "        url = f'ws://127.0.0.1:{s.sockets[0].getsockname()[1]}/v1'\n"
        "        r = await asyncio.to_thread(subprocess.run, [sys.executable, '-m', 'voxline', 'replay',\n"
        f"            {str(EXAMPLE)!r}, '--url', url, '--out', {str(tmp_path / 'h.wav')!r},\n"
        f"            '--events', {str(tmp_path / 'e.jsonl')!r}], capture_output=True, text=True)\n"
        "        sys.stdout.write(r.stdout + r.stderr)\n"
        "asyncio.run(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert "bye\\x1b[2J" in run.stdout, run.stdout + run.stderr
    assert not any(c in run.stdout for c in "\x1b\x07\r"), repr(run.stdout)


def test_a_log_record_quoting_a_server_is_one_line_with_its_controls_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from voxline.base.log_output import log_to_stderr

    root = logging.getLogger("voxline")
    saved = root.handlers[:], root.level, root.propagate
    log_to_stderr("info")
    try:
        logging.getLogger("voxline.session").warning("connection lost (close code %s %s)", 4000,
                                                     "bye\r\n2026-12-04 ERROR voxline: forged\x1b[2J")
    finally:
        root.handlers[:], root.level, root.propagate = saved
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bye\\x0d\\x0a2026-12-04 ERROR voxline: forged\\x1b[2J" in err


def test_a_replays_user_transcript_line_shows_a_servers_item_id_as_text() -> None:
    from voxline.session.replay.result import ReplayLines

    line = ReplayLines(verbose=1).line(TranscriptDone("user", "it\x1b[31m", "hello"), 1.0)
    assert line is not None and "\x1b" not in line and "it\\x1b[31m" in line


def test_the_talk_screen_shows_a_servers_words_as_text() -> None:
    from rich.console import Console

    from voxline.session.cli.talk_view import LiveScreen, TalkModel

    model = TalkModel(endpoint="ws://127.0.0.1:1/v1", mode="ws")
    model.apply(TranscriptDone("assistant", "item_1", HOSTILE), "1.0")
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=200)
    console.print(LiveScreen(model, console).render())
    assert "PWNED" in out.getvalue() and "\x1b]0;" not in out.getvalue() and "\x1b[2J" not in out.getvalue()
    assert "\u202e" not in out.getvalue()


def test_the_talk_screen_shows_no_key_a_server_echoes() -> None:
    from rich.console import Console

    from voxline.base.redaction import forget_secret, register_secret
    from voxline.session.cli.talk_view import LiveScreen, TalkModel

    key = "QZ7X2LM9ZT4WV8RB3KC6QZ7X"
    register_secret(key)
    try:
        model = TalkModel(endpoint="ws://127.0.0.1:1/v1", mode="ws")
        model.apply(TranscriptDone("assistant", "item_1", f"Your key is {key}, keep it safe."), "1.0")
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, color_system=None, width=200)
        console.print(LiveScreen(model, console).render())
    finally:
        forget_secret(key)
    assert "Your key is [redacted]" in out.getvalue() and key[:8] not in out.getvalue()


def test_line_and_paragraph_separators_are_shown_as_escapes() -> None:
    assert printable("a\u2028b\u2029c\x85d") == "a\\u2028b\\u2029c\\x85d"
    assert len(printable("reason\u2028forged").splitlines()) == 1


def test_a_log_record_goes_to_stderr_as_it_is_when_the_record_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """talk's live panel puts its own stderr in place while it shows, and prints a line above itself; a record
    written to the stderr of when logging was set up tore the panel (the line overwritten, a stale panel left)."""
    import io
    import logging

    from voxline.base.log_output import log_to_stderr

    root = logging.getLogger("voxline")
    saved = root.handlers[:], root.level, root.propagate
    log_to_stderr("info")
    try:
        display = io.StringIO()
        monkeypatch.setattr("sys.stderr", display)
        logging.getLogger("voxline.session").warning("connection lost")
    finally:
        root.handlers[:], root.level, root.propagate = saved
    assert display.getvalue().count("\n") == 1 and "WARNING voxline.session: connection lost" in display.getvalue()


def test_a_byte_that_is_no_utf8_is_shown_as_that_byte() -> None:
    assert printable(os.fsdecode(b"bad\xff.wav")) == "bad\\xff.wav"
    assert printable("\ud800") == "\\ud800"
    printable("".join(map(chr, range(0xD800, 0xE000)))).encode("utf-8")  # all of it writable


def test_a_recording_whose_name_is_not_utf8_or_has_escapes_is_replayed_and_named_as_text(tmp_path: Path) -> None:
    """A file name's bytes reach the terminal as escapes: not an escape sequence, and not a traceback where a UTF-8
    locale's stdout cannot write a byte that is no UTF-8 (the name as Python decodes it holds a lone surrogate)."""
    import wave

    import numpy as np

    from voxline.audio.wavio import read_wav

    samples, _rate = read_wav(EXAMPLE)
    name = b"bad\xff\x1b[31m.wav"
    with wave.open(os.fsdecode(os.path.join(os.fsencode(tmp_path), name)), "wb") as w:  # stereo: a note names it
        w.setnchannels(2), w.setsampwidth(2), w.setframerate(24_000)
        w.writeframes(np.repeat(samples[:, None], 2, axis=1).tobytes())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}  # as under en_US.UTF-8
    run = subprocess.run([Path(sys.executable).parent / "voxline", "replay", name, "--fast", "--voice", "tone"],
                         cwd=tmp_path, capture_output=True, env=env, timeout=180)
    out, err = run.stdout.decode(), run.stderr.decode()
    assert run.returncode == 0 and "Traceback" not in err, err
    assert "voxline: bad\\xff\\x1b[31m.wav: 2 channels, averaged to mono" in err
    assert "replaying bad\\xff\\x1b[31m.wav" in out and "wrote bad\\xff\\x1b[31m.heard.wav" in out
    assert "\x1b" not in out + err
