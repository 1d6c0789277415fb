"""The two-channel export: the input on the left, what the listener heard on the right, sample-aligned.

Run through the installed ``voxline`` as a user runs it; the alignment is checked against the
barge-in the session logged: the right channel stops at the cut the session made, while the
left holds the user's interruption from its first sample.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.sinks import WavSink
from voxline.audio.stereo import write_stereo
from voxline.audio.recording import WavFeed
from voxline.audio.wavio import read_wav, write_wav
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.events import BargeIn
from voxline.session.replay import replay_fast
from voxline.session.replay.inputs import load_input, open_input
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


class _Counted:
    """A feed that remembers the largest read asked of it."""

    def __init__(self, feed: WavFeed) -> None:
        self._feed, self.frames, self.largest = feed, feed.frames, 0

    def read(self, n: int) -> np.ndarray:
        self.largest = max(self.largest, n)
        return self._feed.read(n)


def test_write_stereo_streams_an_input_feed_to_the_same_file_as_its_samples(tmp_path: Path) -> None:
    """An input given as a feed (``--stereo-out`` opens the recording as one) is read a second at a time,
    resampled as it is read, and comes out as the same file as the whole recording in memory."""
    rng = np.random.default_rng(3)
    write_wav(tmp_path / "in16k.wav", rng.integers(-8000, 8000, 16_000 * 5 + 123).astype(np.int16), 16_000)
    write_wav(tmp_path / "heard.wav", rng.integers(-8000, 8000, 2 * R).astype(np.int16))
    whole = load_input(tmp_path / "in16k.wav", quiet=True)
    write_stereo(tmp_path / "whole.wav", whole, tmp_path / "heard.wav")
    with open_input(tmp_path / "in16k.wav", quiet=True) as feed:
        counted = _Counted(feed)
        assert write_stereo(tmp_path / "fed.wav", counted, tmp_path / "heard.wav") == len(whole)
    assert counted.largest == R  # a second at a time, never the whole recording
    assert (tmp_path / "fed.wav").read_bytes() == (tmp_path / "whole.wav").read_bytes()


def test_a_stopped_replays_stereo_file_ends_where_the_replay_stopped(tmp_path: Path) -> None:
    """Stopped at the barge-in, 3.5 s into six seconds of input: the left channel holds the input the
    session captured until then and nothing of the rest, and the file is as long as HEARD.wav."""
    make_recording(tmp_path / "call.wav", 4, True)
    user, _ = read_wav(tmp_path / "call.wav")
    stop = asyncio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, BargeIn):
            stop.set()

    with WavSink(tmp_path / "heard.wav") as sink:
        result = replay_fast(user, scenario=load_scenario(None), voice="tone", sink=sink, on_event=on_event,
                             stop=stop)
    heard, _ = read_wav(tmp_path / "heard.wav")
    captured = result.captured_samples
    assert result.interrupted and captured is not None
    assert 3.5 * R <= captured < 5 * R  # the start of the input, up to the stop
    assert 0 <= len(heard) - captured <= 960  # the input goes over in 40 ms chunks: a chunk cut short is not captured
    with open_input(tmp_path / "call.wav", quiet=True) as feed:
        frames = write_stereo(tmp_path / "both.wav", feed, tmp_path / "heard.wav", captured=captured)
    left, right = read_stereo(tmp_path / "both.wav")
    assert frames == len(left) == max(captured, len(heard))
    assert np.array_equal(left[:captured], user[:captured]) and not left[captured:].any()
    assert np.array_equal(right[: len(heard)], heard)


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
