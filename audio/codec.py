"""Samples to wire bytes and back, in any :class:`~voxline.base.audio_format.AudioFormat`.

PCM16 is little-endian at 24 kHz; G.711 µ-law/A-law is 8 kHz, one byte per sample
(:mod:`voxline.audio.g711`). No rate conversion happens here.
"""

from __future__ import annotations

from typing import assert_never

import numpy as np
import numpy.typing as npt

from voxline.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from voxline.base.audio_format import AudioFormat
from voxline.base.errors import AudioError

__all__ = ["decode", "encode"]


def decode(fmt: AudioFormat, data: bytes | bytearray | memoryview) -> npt.NDArray[np.int16]:
    """Wire bytes (e.g. a decoded ``response.output_audio.delta``) to int16 samples at ``fmt.rate``."""
    match fmt.encoding:
        case "pcm16":
            if len(data) % 2:
                raise AudioError(f"PCM16 audio has an odd number of bytes ({len(data)})")
            return np.frombuffer(data, dtype="<i2").astype(np.int16, copy=False)
        case "pcmu":
            return ulaw_decode(data)
        case "pcma":
            return alaw_decode(data)
        case _:
            assert_never(fmt.encoding)


def encode(fmt: AudioFormat, samples: npt.NDArray[np.int16]) -> bytes:
    """int16 samples at ``fmt.rate`` to wire bytes (e.g. for ``input_audio_buffer.append``)."""
    match fmt.encoding:
        case "pcm16":
            array = np.asarray(samples)
            if array.dtype != np.int16:
                raise TypeError(f"PCM16 encoding takes int16 samples, got {array.dtype}")
            return array.astype("<i2", copy=False).tobytes()
        case "pcmu":
            return ulaw_encode(samples).tobytes()
        case "pcma":
            return alaw_encode(samples).tobytes()
        case _:
            assert_never(fmt.encoding)
