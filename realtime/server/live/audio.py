"""Audio of a Live session on the wire: its format, decoding input, encoding the output track.

A Live WebSocket picks one format at ``session.start`` for both directions: PCM16 at 16 or
24 kHz, or G.711 μ-law / A-law at 8 kHz. Inside the stand-in everything the model says is
24 kHz PCM16; what the caller says stays at its own rate for the voice activity detector
and is converted to 24 kHz only for a sideband's reflection (which is always 24 kHz PCM16).
Conversions are streaming (:class:`~voxline.audio.resample.StreamResampler`): the output
track is one continuous signal, so one filter per direction keeps it seamless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from voxline.audio.resample import StreamResampler

__all__ = ["MODEL_RATE", "LiveFormat", "Pcm", "SteadyResampler", "TrackEncoder"]

MODEL_RATE = 24_000
"""The rate of the model's own audio, of fixtures and of every sideband reflection."""

Pcm = npt.NDArray[np.int16]


@dataclass(frozen=True, slots=True)
class LiveFormat:
    """``audio.format`` of a Live WebSocket: ``audio/pcm`` (16 or 24 kHz), ``audio/pcmu``, ``audio/pcma`` (8 kHz)."""

    type: str = "audio/pcm"
    rate: int = MODEL_RATE

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self.type == "audio/pcm" else 1

    def wire(self) -> dict[str, Any]:
        return {"type": self.type, "rate": self.rate}

    def decode(self, data: bytes) -> Pcm:
        """Wire bytes → int16 samples at :attr:`rate` (the caller keeps any odd trailing byte)."""
        if self.type == "audio/pcmu":
            return ulaw_decode(data)
        if self.type == "audio/pcma":
            return alaw_decode(data)
        return np.frombuffer(data, dtype="<i2").astype(np.int16)

    def encode(self, samples: Pcm) -> bytes:
        """int16 samples at :attr:`rate` → wire bytes."""
        if self.type == "audio/pcmu":
            return ulaw_encode(samples).tobytes()
        if self.type == "audio/pcma":
            return alaw_encode(samples).tobytes()
        return samples.astype("<i2").tobytes()


class SteadyResampler:
    """A streaming resampler whose output keeps pace with its input, sample for sample.

    The filter holds some output back and releases it in uneven blocks; here every call
    returns exactly the samples its input is worth (``total_in * out_rate // in_rate`` so far),
    the filter's first output delayed by zeros. So a 100 ms frame in is a 100 ms frame out,
    and positions on the timeline hold (late by the filter's delay, a few milliseconds).
    """

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self._resampler = StreamResampler(in_rate, out_rate)
        self._in_rate, self._out_rate = in_rate, out_rate
        self._fifo = np.zeros(0, dtype=np.int16)
        self._taken = 0
        self._given = 0

    def process(self, samples: Pcm) -> Pcm:
        if self._resampler.identity:
            return samples
        self._taken += int(samples.size)
        due = self._taken * self._out_rate // self._in_rate - self._given
        self._fifo = np.concatenate([self._fifo, self._resampler.process(samples)])
        if self._fifo.size < due:  # the filter's start-up delay
            self._fifo = np.concatenate([np.zeros(due - self._fifo.size, dtype=np.int16), self._fifo])
        out, self._fifo = self._fifo[:due], self._fifo[due:]
        self._given += due
        return out


class TrackEncoder:
    """The model's 24 kHz track → wire bytes in ``fmt``, one continuous stream."""

    def __init__(self, fmt: LiveFormat) -> None:
        self.format = fmt
        self._resampler = SteadyResampler(MODEL_RATE, fmt.rate)

    def encode(self, samples: Pcm) -> bytes:
        return self.format.encode(self._resampler.process(samples))
