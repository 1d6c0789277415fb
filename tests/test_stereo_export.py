"""The two-channel export: the input on the left, what the listener heard on the right, sample-aligned.

Run through the installed ``voxline`` as a user runs it; the alignment is checked against the
barge-in the session logged: the right channel stops at the cut the session made, while the
left holds the user's interruption from its first sample.
"""

from __future__ import annotations

import json
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.stereo import write_stereo
from voxline.audio.wavio import read_wav, write_wav
from tests.support.cli import VOXLINE
from tests.support.farm import make_recording

R = 24000


def read_stereo(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(str(path), "rb") as f:
        assert (f.getnchannels(), f.getsampwidth(), f.getframerate()) == (2, 2, R)
        frames = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").reshape(-1, 2)
    return frames[:, 0], frames[:, 1]


def test_write_stereo_pads_the_shorter_side_with_silence(tmp_path: Path) -> None:
    heard = (np.arange(3 * R) % 1000).astype(np.int16)
    write_wav(tmp_path / "heard.wav", heard)
    user = np.full(R + 7, 5, dtype=np.int16)
    assert write_stereo(tmp_path / "both.wav", user, tmp_path / "heard.wav") == 3 * R
    left, right = read_stereo(tmp_path / "both.wav")
    assert np.array_equal(right, heard)
    assert (left[: R + 7] == 5).all() and not left[R + 7 :].any()


@pytest.mark.slow
def test_stereo_out_puts_the_input_and_the_heard_audio_side_by_side_to_the_sample(tmp_path: Path) -> None:
    make_recording(tmp_path / "call.wav", 4, True)  # a question at 0.3 s, the user talks over the reply at 3.5 s
    run = subprocess.run([str(VOXLINE), "replay", "call.wav", "--fast", "--voice", "tone", "--out", "heard.wav",
                          "--events", "events.jsonl", "--stereo-out", "both.wav"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "wrote both.wav (left: the input, right: what the listener heard)" in run.stdout
    left, right = read_stereo(tmp_path / "both.wav")
    user, _ = read_wav(tmp_path / "call.wav")
    heard, _ = read_wav(tmp_path / "heard.wav")
    assert len(left) == max(len(user), len(heard))
    assert np.array_equal(left[: len(user)], user) and np.array_equal(right[: len(heard)], heard)
    cut = next(e["event"] for e in map(json.loads, (tmp_path / "events.jsonl").read_text().splitlines())
               if e["dir"] == "local" and e["event"]["type"] == "BargeIn")
    at = round(cut["at"] * R)
    onset = int(np.flatnonzero(left[int(3.4 * R):])[0]) + int(3.4 * R)
    assert onset == int(3.5 * R) and onset <= at  # the user's interruption, where the input has it
    assert right[at - 480 : at].any()  # the reply played up to the cut …
    assert not right[at + round(0.0055 * R) : at + R // 2].any()  # … and, past the 5 ms fade, the listener heard nothing


@pytest.mark.slow
def test_a_farm_writes_a_stereo_file_per_recording(tmp_path: Path) -> None:
    for n in range(2):
        make_recording(tmp_path / f"c{n}.wav", n, n == 0)
    run = subprocess.run([str(VOXLINE), "replay", "c0.wav", "c1.wav", "--fast", "--voice", "tone", "--out-dir", "out",
                          "--farm-stereo"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for n in range(2):
        left, right = read_stereo(tmp_path / "out" / f"c{n}" / "stereo.wav")
        assert np.array_equal(right[: len(heard := read_wav(tmp_path / "out" / f"c{n}" / "heard.wav")[0])], heard)
        assert np.array_equal(left[:6 * R], read_wav(tmp_path / f"c{n}.wav")[0])
