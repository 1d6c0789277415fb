"""Recordings for replay farms: generated speech-like bursts, one question, maybe an interruption."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxline.audio.wavio import write_wav
from voxline.base.audio_format import SAMPLE_RATE
from tests.support.hostile import speech

__all__ = ["make_recording"]


def make_recording(path: Path, seed: int, interrupt: bool) -> None:
    """A question at 0.3 s; with ``interrupt``, the user talks over the reply at 3.5 s. Six seconds."""
    rng = np.random.default_rng(seed)
    samples = np.zeros(6 * SAMPLE_RATE, dtype=np.int16)
    question = speech(rng, 0.8 + 0.01 * (seed % 5))
    samples[int(0.3 * SAMPLE_RATE):][: len(question)] = question
    if interrupt:
        over = speech(rng, 0.6)
        samples[int(3.5 * SAMPLE_RATE):][: len(over)] = over
    write_wav(path, samples)
