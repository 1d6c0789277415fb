"""``voxline replay --fast`` holds memory flat in the recording's length: the input is streamed from
its file and the in-process engine keeps how much audio each item has, not the audio itself; the
report's waveforms and the stereo export read the input and HEARD.wav a block at a time too.

The installed command replays a short and a long recording made of the same call repeated,
each in a fresh process; the peak resident sets (the child's own ``rusage``) are compared.
Before streaming, the long one peaked about 5.8 MiB higher per minute of audio; with ``--report``
and ``--stereo-out`` reading both files whole, about 14 MiB more per minute again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import read_wav, write_wav
from voxline.base.audio_format import SAMPLE_RATE
from tests.support.cli import EXAMPLE, measured_run

pytestmark = pytest.mark.slow

SHORT_MIN, LONG_MIN = 2, 12
ALLOWED_GROWTH_MIB = 20  # the input journal's bounded two minutes of turns and the events gathered; not 58 MiB


def _recording(path: Path, minutes: int) -> Path:
    samples, rate = read_wav(EXAMPLE)
    assert rate == SAMPLE_RATE
    n = minutes * 60 * rate
    write_wav(path, np.tile(samples, -(-n // len(samples)))[:n])
    return path


def _peak_mib(tmp_path: Path, minutes: int) -> float:
    recording = _recording(tmp_path / f"{minutes}min.wav", minutes)
    done, peak_kib, _cpu = measured_run("replay", str(recording), "--fast", "--voice", "tone", "--out",
                                        str(tmp_path / "heard.wav"), "--events", str(tmp_path / "events.jsonl"),
                                        "--report", str(tmp_path / "report.html"), "--stereo-out",
                                        str(tmp_path / "both.wav"), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'heard.wav'}" in done.stdout
    assert (tmp_path / "report.html").stat().st_size > 0 and (tmp_path / "both.wav").stat().st_size > 4 * 60 * SAMPLE_RATE * minutes
    return peak_kib / 1024


def test_peak_memory_of_a_fast_replay_does_not_grow_with_the_recording(tmp_path: Path) -> None:
    short, long = _peak_mib(tmp_path, SHORT_MIN), _peak_mib(tmp_path, LONG_MIN)
    assert long - short < ALLOWED_GROWTH_MIB, f"{SHORT_MIN} min: {short:.1f} MiB, {LONG_MIN} min: {long:.1f} MiB"
