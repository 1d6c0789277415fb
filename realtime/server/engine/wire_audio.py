"""Audio bytes in a session's :class:`~voxline.base.audio_format.AudioFormat` ↔ int16 samples.

``audio/pcm`` is PCM16 little-endian mono at 24 kHz; ``audio/pcmu`` / ``audio/pcma``
are G.711 at 8 kHz. The codec is :mod:`voxline.audio.codec`; rates are converted with soxr
between the format's rate and the pipeline's :data:`~voxline.base.audio_format.SAMPLE_RATE`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import soxr

from voxline.audio import codec
from voxline.base.audio_format import SAMPLE_RATE, AudioFormat

__all__ = ["from_pcm24k", "to_pcm", "to_pcm24k"]

Samples = npt.NDArray[np.int16]


def to_pcm(data: bytes, fmt: AudioFormat) -> Samples:
    """Wire bytes → int16 samples at ``fmt.rate``; a trailing partial sample is ignored."""
    usable = len(data) - len(data) % fmt.bytes_per_sample
    return codec.decode(fmt, data[:usable])


def to_pcm24k(data: bytes, fmt: AudioFormat) -> Samples:
    """Wire bytes → int16 samples at the pipeline rate."""
    return _resample(to_pcm(data, fmt), fmt.rate, SAMPLE_RATE)


def from_pcm24k(samples: npt.ArrayLike, fmt: AudioFormat) -> bytes:
    """Samples at the pipeline rate → wire bytes in ``fmt``."""
    pcm = np.asarray(samples, dtype=np.int16)
    return codec.encode(fmt, _resample(pcm, SAMPLE_RATE, fmt.rate))


def _resample(samples: Samples, rate_in: int, rate_out: int) -> Samples:
    if rate_in == rate_out or samples.size == 0:
        return samples
    converted = soxr.resample(samples.astype(np.float32) / 32768.0, rate_in, rate_out, quality="HQ")
    out: Samples = np.clip(np.round(converted * 32768.0), -32768, 32767).astype(np.int16)
    return out
