"""``voxline replay`` on one recording as a newcomer runs it: outputs named by default, or a farm of one."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.cli import EXAMPLE, VOXLINE, one_line_error

pytestmark = pytest.mark.slow  # each test runs the installed voxline command


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VOXLINE), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=os.environ.copy())


def test_one_replay_without_output_paths_names_them_after_it_in_the_current_directory(tmp_path: Path) -> None:
    run = _run(tmp_path, "replay", str(EXAMPLE), "--fast", "--voice", "tone")
    assert run.returncode == 0, run.stderr
    heard, events = tmp_path / "barge_in.heard.wav", tmp_path / "barge_in.events.jsonl"
    assert heard.stat().st_size > 100_000 and events.stat().st_size > 0
    assert run.stdout.splitlines()[-1].startswith("wrote barge_in.heard.wav (") and "barge_in.events.jsonl" in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["barge_in.events.jsonl", "barge_in.heard.wav"]


def test_a_default_output_is_never_written_over_the_input(tmp_path: Path) -> None:
    recording = tmp_path / "call.wav"
    recording.write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "call.heard.wav").symlink_to(recording)  # the default name leads to the input itself
    run = _run(tmp_path, "replay", "call.wav", "--fast", "--voice", "tone")
    assert "call.heard.wav is the input call.wav" in one_line_error(run)
    assert recording.read_bytes() == EXAMPLE.read_bytes()


def test_one_recording_with_an_out_dir_and_junit_is_a_farm_of_one(tmp_path: Path) -> None:
    run = _run(tmp_path, "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out-dir", "out", "--junit", "j.xml")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "barge_in" / "heard.wav").is_file()
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert row["name"] == "barge_in" and row["status"] == "pass"
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert suite.get("tests") == "1"
    assert "farm: 1 recording, 1 passed" in run.stdout and "farm of 1 recording " in run.stderr


def test_a_farm_line_says_how_much_of_the_replies_was_heard_not_the_length_of_heard_wav(tmp_path: Path) -> None:
    run = _run(tmp_path, "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out-dir", "out")
    assert run.returncode == 0, run.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    # the first reply is cut at 3.3 s heard; the whole second reply is heard; heard.wav is longer than both
    assert 3.3 < row["reply_heard_s"] < row["duration_s"]
    line = next(line for line in run.stdout.splitlines() if line.startswith("  PASS"))
    assert f"{row['reply_heard_s']:.1f} s of replies heard in {row['duration_s']:.1f} s replayed" in line
    assert "1 barge-in," in line
