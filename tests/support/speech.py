"""Deterministic speech fixtures made with espeak-ng and sox.

espeak-ng is byte-identical across runs and sox runs with ``-D`` (no dither), so a
fixture's speech onset is known to the sample. Files are cached per test session.
"""

from __future__ import annotations

import hashlib
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.support.ci import require_tool

__all__ = ["Utterance", "make_utterance", "mix_timeline", "read_wav", "write_wav"]

RATE = 24_000


@dataclass(frozen=True)
class Utterance:
    text: str
    samples: np.ndarray  # int16 mono 24 kHz, trimmed of leading and trailing silence


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def make_utterance(text: str, cache: Path, voice: str = "en-us", speed: int = 160) -> Utterance:
    """Speak ``text`` and trim it to the first and last sample of speech."""
    require_tool("espeak-ng")
    require_tool("sox")
    key = hashlib.sha256(f"{voice}|{speed}|{text}".encode()).hexdigest()[:16]
    raw, trimmed = cache / f"{key}.raw.wav", cache / f"{key}.wav"
    if not trimmed.exists():
        cache.mkdir(parents=True, exist_ok=True)
        _run("espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), text)
        _run("sox", "-D", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer", str(trimmed),
             "silence", "1", "0.005", "0.5%", "reverse", "silence", "1", "0.005", "0.5%", "reverse")
    return Utterance(text, read_wav(trimmed))


def mix_timeline(total_s: float, parts: list[tuple[float, np.ndarray]]) -> np.ndarray:
    """Place utterances at exact onsets (seconds) on a silent timeline."""
    out = np.zeros(int(round(total_s * RATE)), dtype=np.int32)
    for onset, samples in parts:
        start = int(round(onset * RATE))
        out[start : start + len(samples)] += samples[: max(0, len(out) - start)]
    return np.clip(out, -32768, 32767).astype(np.int16)


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()


def write_wav(path: Path, samples: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.astype("<i2").tobytes())
    return path
