"""Speech synthesis for scripted replies: PCM16 mono at 24 kHz.

Voices:

- ``"espeak"`` (or ``"espeak:<variant>"``, e.g. ``"espeak:en-gb+f3"``): runs the
  ``espeak-ng`` program (variant ``en-us``, 160 words per minute by default) and
  resamples its 22.05 kHz output to 24 kHz with soxr. espeak-ng output is
  byte-identical across runs, so the result is deterministic.
- ``"tone"``: a synthetic voice that needs no external tool. Each word becomes a
  harmonic tone (fundamental near 120 Hz, six harmonics) amplitude-modulated at a
  syllable rate of 5 Hz, about 70 ms per letter, with short gaps between words and
  longer pauses at punctuation. It is fully deterministic and has speech-like
  energy, so energy VADs treat it as speech.

Results are cached in-process and returned read-only.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np
import soxr

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

__all__ = ["SAMPLE_RATE", "VoiceUnavailableError", "available_voices", "espeak_available", "synthesize"]

_ESPEAK = "espeak-ng"
_ESPEAK_DEFAULT_VARIANT = "en-us"
_ESPEAK_WPM = 160


class VoiceUnavailableError(AudioError, LookupError):
    """The requested voice cannot run here (e.g. ``espeak-ng`` is not installed, or fails): a command says so in
    one line, as it says every :class:`~voxline.base.errors.VoxlineError`."""


def espeak_available() -> bool:
    """True when the ``espeak-ng`` program is on ``PATH``."""
    return shutil.which(_ESPEAK) is not None


def available_voices() -> tuple[str, ...]:
    """Voice names usable on this machine, best first."""
    return ("espeak", "tone") if espeak_available() else ("tone",)


def synthesize(text: str, voice: str = "espeak") -> np.ndarray:
    """Speak ``text`` with ``voice``; return read-only int16 samples at 24 kHz mono."""
    if voice == "tone":
        return _cached(text, "tone", "")
    if voice == "espeak" or voice.startswith("espeak:"):
        variant = voice.partition(":")[2] or _ESPEAK_DEFAULT_VARIANT
        if not espeak_available():
            raise VoiceUnavailableError("espeak-ng is not installed; use the 'tone' voice")
        return _cached(text, "espeak", variant)
    raise ValueError(f"unknown voice {voice!r}; expected 'espeak', 'espeak:<variant>' or 'tone'")


@functools.lru_cache(maxsize=256)
def _cached(text: str, kind: str, variant: str) -> np.ndarray:
    samples = _espeak(text, variant) if kind == "espeak" else _tone(text)
    samples.flags.writeable = False
    return samples


def _espeak(text: str, variant: str) -> np.ndarray:
    if not text.strip():
        return np.zeros(0, dtype=np.int16)
    with tempfile.TemporaryDirectory(prefix="voxline-voice-") as tmp:
        out = Path(tmp) / "speech.wav"
        # The text goes through stdin so it can never be read as an option.
        try:
            subprocess.run(
                [_ESPEAK, "-v", variant, "-s", str(_ESPEAK_WPM), "-w", str(out)],
                input=text.encode("utf-8"),
                check=True,
                capture_output=True,
                timeout=60,
            )
        except subprocess.CalledProcessError as exc:
            said = exc.stderr.decode("utf-8", "replace").strip().splitlines() if exc.stderr else []
            detail = f": {said[0]}" if said else ""
            raise VoiceUnavailableError(f"espeak-ng cannot speak with voice {variant!r}{detail}") from None
        except subprocess.TimeoutExpired:
            raise VoiceUnavailableError("espeak-ng did not finish speaking in 60 s") from None
        except OSError as exc:  # it could not be run (removed since it was found, not executable)
            raise VoiceUnavailableError(f"espeak-ng could not be run: {exc.strerror or exc}") from None
        try:
            with wave.open(str(out), "rb") as wav:
                rate = wav.getframerate()
                raw = wav.readframes(wav.getnframes())
        except (wave.Error, EOFError, OSError) as exc:  # no file, or a cut one (a full disk, a file-size limit)
            raise VoiceUnavailableError(f"espeak-ng wrote no usable audio ({exc})") from None
    pcm = np.frombuffer(raw[: len(raw) // 2 * 2], dtype="<i2").astype(np.int16)
    if rate == SAMPLE_RATE:
        return pcm
    resampled: np.ndarray = soxr.resample(pcm.astype(np.float32) / 32768.0, rate, SAMPLE_RATE, quality="HQ")
    result: np.ndarray = np.clip(np.round(resampled * 32768.0), -32768, 32767).astype(np.int16)
    return result


_MS_PER_LETTER = 70
_WORD_GAP_MS = 40
_PAUSES_MS = {",": 150, ";": 200, ":": 200, ".": 300, "!": 300, "?": 300}


def _tone(text: str) -> np.ndarray:
    """The ``tone`` voice: one amplitude-modulated harmonic burst per word."""
    pieces: list[np.ndarray] = []
    phase = 0.0
    words = _words(text)
    for index, (word, pause_ms) in enumerate(words):
        if word:
            seconds = max(0.12, len(word) * _MS_PER_LETTER / 1000.0)
            f0 = 120.0 + (sum(map(ord, word)) % 9) * 4.0 - 8.0 * index / max(1, len(words))
            burst, phase = _burst(seconds, f0, phase)
            pieces.append(burst)
        pieces.append(np.zeros(SAMPLE_RATE * (pause_ms or _WORD_GAP_MS) // 1000, dtype=np.float64))
    if not pieces:
        return np.zeros(0, dtype=np.int16)
    signal = np.concatenate(pieces)
    return np.round(signal * 0.3 * 32767.0).astype(np.int16)


def _words(text: str) -> list[tuple[str, int]]:
    """Split into (letters, pause after in ms); punctuation lengthens the pause."""
    out: list[tuple[str, int]] = []
    for raw in text.split():
        letters = "".join(ch for ch in raw if ch.isalnum())
        pause = max((_PAUSES_MS.get(ch, 0) for ch in raw), default=0)
        if letters or pause:
            out.append((letters, pause))
    return out


def _burst(seconds: float, f0: float, phase: float) -> tuple[np.ndarray, float]:
    n = int(round(seconds * SAMPLE_RATE))
    t = np.arange(n, dtype=np.float64) / SAMPLE_RATE
    vibrato = 1.0 + 0.01 * np.sin(2 * np.pi * 5.5 * t)
    inst_phase = phase + 2 * np.pi * f0 * np.cumsum(vibrato) / SAMPLE_RATE
    wave_ = sum(np.sin(k * inst_phase) / k for k in range(1, 7)) / 2.45
    syllables = 0.55 - 0.45 * np.cos(2 * np.pi * 5.0 * t)
    edge = np.minimum(1.0, np.minimum(t, seconds - t) / 0.015)
    return wave_ * syllables * np.clip(edge, 0.0, 1.0), float(inst_phase[-1] if n else phase)
