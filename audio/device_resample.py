"""Rate adapters between the 24 kHz pipeline and a device that runs at another rate.

Both keep exact timing through soxr's alignment: a streaming soxr resampler withholds
output while its filter fills but never shifts it, so output sample ``j`` stands for input
time ``j / out_rate`` exactly (checked in the tests with an impulse).

* :class:`PlayoutReader` feeds an output callback at the device rate: it pulls short
  chunks from the playout buffer, resamples them into a FIFO and hands out ``frames``
  samples. The listener time of playout sample ``i`` is ``t + i/24000 − c/R`` where ``t``
  is the DAC time of the current block and ``c`` the device samples handed out before it.
  The FIFO holds resampled audio ahead of the device (HQ soxr releases output in bursts of
  up to ~35 ms); all of it is recorded in the ledger with its future listener time, so a
  barge-in revokes it like audio inside the device, and :meth:`PlayoutReader.reset` drops it.
* :class:`CaptureResampler` converts microphone blocks to 24 kHz and stamps each output
  run with the capture time of its first sample.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.resample import StreamResampler
from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["CaptureResampler", "PlayoutReader"]

Samples = npt.NDArray[np.int16]


class PlayoutReader:
    """Reads a playout buffer at a device rate (audio thread only)."""

    def __init__(self, playout: PlayoutBuffer, device_rate: int, *, chunk: int = 240, capacity: int = 8192) -> None:
        self.playout = playout
        self.device_rate = device_rate
        self._resampler = StreamResampler(playout.rate, device_rate)
        self._scratch = np.zeros(chunk, dtype=np.int16)
        self._fifo = np.zeros(capacity, dtype=np.int16)
        self._have = 0
        self._read = 0  # playout samples pulled since the last reset
        self._consumed = 0  # device samples handed out since the last reset

    def read_into(self, out: Samples, dac: float) -> None:
        """Fill ``out`` (device rate); ``dac`` is the listener time of ``out[0]``."""
        n = len(out)
        while self._have < n:
            when = dac + self._read / self.playout.rate - self._consumed / self.device_rate
            self.playout.read_into(self._scratch, when)
            self._read += len(self._scratch)
            self._push(self._resampler.process(self._scratch))
        out[:] = self._fifo[:n]
        self._fifo[: self._have - n] = self._fifo[n : self._have]
        self._have -= n
        self._consumed += n

    def _push(self, samples: Samples) -> None:
        need = self._have + len(samples)
        if need > len(self._fifo):  # a device block larger than the FIFO (or a very fast device): grown, once per size,
            grown = np.zeros(max(need, 2 * len(self._fifo)), dtype=np.int16)  # never cut: what was cut would count
            grown[: self._have] = self._fifo[: self._have]                     # as heard, and a block could never fill
            self._fifo = grown
        self._fifo[self._have : need] = samples
        self._have = need

    def reset(self) -> None:
        """Drop the FIFO and the filter state (the stream was aborted)."""
        self._resampler.reset()
        self._have = 0
        self._read = 0
        self._consumed = 0

    @property
    def buffered(self) -> int:
        """Device-rate samples resampled but not yet handed to the device."""
        return self._have


class CaptureResampler:
    """Device-rate capture blocks → 24 kHz runs with the capture time of their first sample."""

    def __init__(self, device_rate: int, rate: int = SAMPLE_RATE) -> None:
        self.rate = rate
        self.device_rate = device_rate
        self._resampler = StreamResampler(device_rate, rate)
        self._in = 0
        self._out = 0

    def process(self, block: Samples, adc: float) -> tuple[float, Samples]:
        """Resample one captured block stamped ``adc``; returns (time of output[0], output)."""
        when = adc + self._out / self.rate - self._in / self.device_rate
        out = self._resampler.process(block)
        self._in += len(block)
        self._out += len(out)
        return when, out
