"""Audio bytes in a session's format ↔ int16 samples.

``audio/pcm`` is PCM16 little-endian mono at 24 kHz; ``audio/pcmu`` / ``audio/pcma``
are G.711 at 8 kHz (codec from :mod:`voxline.audio.g711`, rate conversion with soxr).
"""

from __future__ import annotations

import numpy as np
import soxr

from voxline.audio import g711

__all__ = ["from_pcm24k", "to_pcm"]


def to_pcm(data: bytes, format_type: str) -> np.ndarray:
    """Input-format bytes → int16 samples at the format's own rate (24 kHz PCM or 8 kHz G.711)."""
    if format_type == "audio/pcmu":
        return g711.ulaw_decode(data)
    if format_type == "audio/pcma":
        return g711.alaw_decode(data)
    usable = len(data) - len(data) % 2
    return np.frombuffer(data[:usable], dtype="<i2").astype(np.int16)


def from_pcm24k(samples: np.ndarray, format_type: str) -> bytes:
    """24 kHz int16 samples → bytes in the output format."""
    if format_type == "audio/pcm":
        return np.asarray(samples, dtype="<i2").tobytes()
    low = soxr.resample(np.asarray(samples, dtype=np.float32) / 32768.0, 24000, 8000, quality="HQ")
    pcm8k = np.clip(np.round(low * 32768.0), -32768, 32767).astype(np.int16)
    codes = g711.ulaw_encode(pcm8k) if format_type == "audio/pcmu" else g711.alaw_encode(pcm8k)
    return codes.tobytes()
