"""Streaming sample-rate conversion of int16 mono audio (device rates ↔ 24 kHz, 8 kHz ↔ 24 kHz).

A thin wrapper around ``soxr.ResampleStream``: feed chunks of any size, get whatever output
is ready; ``last=True`` flushes the filter so the total output length converges to
``round(total_in * out_rate / in_rate)``. Equal rates pass samples through untouched.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import soxr

__all__ = ["StreamResampler"]

_EMPTY = np.zeros(0, dtype=np.int16)
_EMPTY.flags.writeable = False


class StreamResampler:
    """Stateful int16 mono resampler; one instance per continuous stream."""

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} → {out_rate}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream: soxr.ResampleStream | None = None
        if in_rate != out_rate:
            self._stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="int16", quality=quality)
        self._finished = False

    @property
    def identity(self) -> bool:
        return self._stream is None

    def process(self, chunk: npt.NDArray[np.int16], last: bool = False) -> npt.NDArray[np.int16]:
        """Resample the next chunk (1-D int16); ``last=True`` also flushes the filter's tail."""
        samples = np.asarray(chunk)
        if samples.dtype != np.int16 or samples.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {samples.dtype} with shape {samples.shape}")
        if self._finished:
            raise RuntimeError("the stream was already flushed with last=True; call reset() first")
        self._finished = last
        if self._stream is None:
            return samples
        out: npt.NDArray[np.int16] = self._stream.resample_chunk(np.ascontiguousarray(samples), last=last)  # soxr is untyped
        return out

    def flush(self) -> npt.NDArray[np.int16]:
        """Output still held in the filter; ends the stream."""
        return self.process(_EMPTY, last=True)

    def reset(self) -> None:
        """Start a fresh stream with the same rates."""
        if self._stream is not None:
            self._stream.clear()
        self._finished = False
