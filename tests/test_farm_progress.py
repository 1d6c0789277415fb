"""A farm's verdicts as they come: on a terminal (a pty) a progress line drawn with rich under the
verdicts; elsewhere (a pipe, a CI log) plain verdict lines, each flushed as its recording finishes.

That a verdict is printed while other recordings still run is shown, on a real-time farm, by
``tests/test_stopping.py`` (the command is still running when the first verdict arrives).
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from voxline.session.cli.farm_progress import FarmProgress
from voxline.session.replay.farm import Outcome
from tests.support.cli import VOXLINE
from tests.support.farm import make_recording

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_plain_lines_come_one_per_outcome_as_it_is_shown() -> None:
    out = io.StringIO()
    progress = FarmProgress(3, out=out, tty=False)
    progress.finished(Outcome("b", "b.wav", "pass", duration_s=6.0, wall_s=0.5))
    assert out.getvalue() == "  PASS  b (0 barge-ins, 0.0 s of replies heard in 6.0 s replayed, 0.5 s wall)\n"
    progress.finished(Outcome("a", "a.wav", "error", error="interrupted before it started"))
    progress.close()
    assert out.getvalue().splitlines()[1] == ("  ERROR a (0 barge-ins, 0.0 s of replies heard in 0.0 s replayed, "
                                              "0.0 s wall): interrupted before it started")
    assert progress.counts == {"pass": 1, "fail": 0, "error": 1} and "\x1b" not in out.getvalue()


def test_the_eta_is_the_pace_so_far_times_what_is_left() -> None:
    progress = FarmProgress(4, out=io.StringIO(), tty=False)
    assert progress.eta_s() is None
    progress.started -= 10.0  # ten seconds ago
    progress.finished(Outcome("a", "a.wav", "pass"))
    eta = progress.eta_s()
    assert eta is not None and 29.0 < eta < 31.5  # 10 s for one, three left


def _in_a_pty(args: list[str], cwd: Path) -> tuple[int, str]:
    main, child = pty.openpty()
    run = subprocess.Popen([str(VOXLINE), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=child,
                           stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert run.stderr is not None
    run.stderr.read()
    return run.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_on_a_terminal_a_progress_line_counts_done_passed_failed_and_eta(tmp_path: Path) -> None:
    for n in range(3):
        make_recording(tmp_path / f"c{n}.wav", n, n != 1)
    (tmp_path / "farm.toml").write_text("".join(
        f'[[recording]]\npath = "c{n}.wav"\nexpect = {{ barge_ins = {0 if n == 2 else (1 if n != 1 else 0)} }}\n'
        for n in range(3)))
    code, screen = _in_a_pty(["replay", "--manifest", "farm.toml", "--fast", "--voice", "tone", "--jobs", "1",
                              "--out-dir", "out"], tmp_path)
    assert code == 1  # c2 interrupts once but is expected not to
    plain = ANSI.sub("", screen)
    assert re.search(r"[123]/3 done", plain) and "passed ·" in plain and "failed ·" in plain and "ETA" in plain
    assert ANSI.search(screen)  # drawn in place, on the terminal
    for name, verdict in (("c0", "PASS "), ("c1", "PASS "), ("c2", "FAIL ")):
        assert f"  {verdict} {name} (" in plain


@pytest.mark.slow
def test_not_on_a_terminal_the_verdicts_are_plain_lines(tmp_path: Path) -> None:
    for n in range(2):
        make_recording(tmp_path / f"c{n}.wav", n, True)
    run = subprocess.run([str(VOXLINE), "replay", "c0.wav", "c1.wav", "--fast", "--voice", "tone", "--out-dir", "out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "ETA" not in run.stdout
    lines = run.stdout.splitlines()
    assert sorted(line[:10] for line in lines[:2]) == ["  PASS  c0", "  PASS  c1"]
    assert lines[2].startswith("farm: 2 recordings, 2 passed")
