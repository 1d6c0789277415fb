"""What ``voxline replay`` prints, as a reader wants it: the user's turns, the assistant's words, the heard
part of a cut reply and each barge-in; ``-v`` adds the wire detail; the README shows a real run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.ci import ROOT
from tests.support.cli import VOXLINE

pytestmark = pytest.mark.slow  # each test runs the installed voxline command

QUICK = "$ uv run --no-dev voxline replay examples/audio/barge_in.wav --fast"
REAL_TIME = "$ uv run --no-dev voxline replay examples/audio/barge_in.wav --out heard_rt.wav"


def _run(cwd: Path, *args: str) -> tuple[int, str, str]:
    """The installed command run in ``cwd``, where ``examples/`` is the repository's (paths print as written)."""
    if not (cwd / "examples").exists():
        (cwd / "examples").symlink_to(ROOT / "examples")
    run = subprocess.run([str(VOXLINE), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                         env=os.environ.copy())
    return run.returncode, run.stdout, run.stderr


def _readme_sample(command: str) -> tuple[list[str], list[str]]:
    """The command line of the README's sample that starts with ``command``, and the lines it shows."""
    blocks: list[list[str]] = []
    inside = False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    first, *shown = next(b for b in blocks if b and b[0].startswith(command))
    words = first.split()
    return words[words.index("voxline") + 1:], shown  # after "$ uv run [--no-dev] voxline"


def _shape(line: str) -> str:
    """A line with its figures masked: what a run on another machine, at another moment, prints alike.

    The time column is right-aligned, so its padding is masked too: a loaded machine may reach an
    event at 10.1 s that the README's run reached at 9.9 s."""
    line = _HEARD.sub(r"\1…", line)  # the words before the cut: which word it falls in moves with the timing too
    return re.sub(r"^ +#", " #", re.sub(r"\d+(\.\d+)?", "#", line))


_HEARD = re.compile(r"(assistant, as heard \(estimate, [^)]*\): ).*")


def test_the_console_shows_turns_words_heard_text_and_barge_ins_and_v_adds_the_wire_detail(tmp_path: Path) -> None:
    code, out, err = _run(tmp_path, "replay", "examples/audio/barge_in.wav", "--fast", "--voice", "tone")
    assert code == 0, err
    assert "item_" not in out and "buffer at" not in out and "resp_" not in out  # no wire ids by default
    assert "0.560s  you: started speaking (your voice began at 0.50 s;" in out
    assert "2.720s  you: stopped speaking (your voice ended at 2.19 s; the server's speech_stopped came 530 ms later)" in out
    assert "assistant: Hello! This is the voxline local server. I can tell when you speak" in out
    assert ("6.040s  assistant, as heard (estimate, 3.31 of 8.99 s received): Hello! This is the voxline local "
            "server. I can tell\n") in out
    assert "6.040s  barge-in (server_vad): the reply cut where it was heard, 3.31 s of 8.99 s received" in out
    code, verbose, err = _run(tmp_path, "replay", "examples/audio/barge_in.wav", "--fast", "--voice", "tone", "-v")
    assert code == 0, err
    assert re.search(r"you: started speaking .* \[SpeechStarted item_\w+, audio_start_ms=200\]", verbose)
    assert re.search(r"\[BargeIn truncate item_\w+ at 3305 ms \(heard 3305\.0 of 8990\.0 ms received\)", verbose)
    assert re.search(r"turn 1: reply heard .* \[AssistantAudioStarted item_\w+\]", verbose)
    assert len(verbose.splitlines()) == len(out.splitlines())  # the same lines, with their detail
    code, very, err = _run(tmp_path, "replay", "examples/audio/barge_in.wav", "--fast", "--voice", "tone", "-vv")
    assert code == 0, err
    assert "state: speaking" in very and re.search(r"assistant: reply completed \[resp_\w+\]", very)


def test_one_turn_has_one_latency_line_with_its_reply_and_each_says_from_what_to_what(tmp_path: Path) -> None:
    code, out, err = _run(tmp_path, "replay", "examples/audio/barge_in.wav", "--fast", "--voice", "tone")
    assert code == 0, err
    turns = [line for line in out.splitlines() if "turn " in line]
    assert [line.split("s  ")[0].strip() for line in turns] == ["2.740", "8.060"]  # when each reply starts
    assert all("ms after your voice ended (" in line for line in turns)
    assert "after you stopped" not in out and "after speech_stopped" not in out


def test_the_readme_shows_what_the_quick_start_replay_prints(tmp_path: Path) -> None:
    args, shown = _readme_sample(QUICK)
    code, out, err = _run(tmp_path, *args, "--voice", "tone")  # the README's machine has no espeak-ng
    assert code == 0, err
    assert [*err.splitlines(), *out.splitlines()] == shown  # lockstep: the same every run, to the character


def test_the_readme_real_time_sample_has_the_shape_of_a_real_run(tmp_path: Path) -> None:
    args, shown = _readme_sample(REAL_TIME)
    code, out, err = _run(tmp_path, *args, "--voice", "tone")
    assert code == 0, err
    assert [_shape(line) for line in [*err.splitlines(), *out.splitlines()]] == [_shape(line) for line in shown]
    reply = next(line.split("assistant: ", 1)[1] for line in out.splitlines() if "assistant: Hello!" in line)
    heard = next(m.string[m.end(1):] for line in out.splitlines() if (m := _HEARD.search(line)))
    assert reply.startswith(heard)  # the words shown as heard are the reply's first ones, whichever they are
