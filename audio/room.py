"""A room between the speaker and the microphone: delay plus a decaying tail.

:class:`RoomEcho` is a plain synchronous DSP object for simulating open speakers offline.
Its impulse response is a direct path of ``gain_db`` after ``delay_ms``, followed by a
reverberant tail of deterministic noise (fixed seed) decaying by 60 dB over ``rt60_ms``
and starting ``tail_db`` below the direct path. :meth:`echo` gives the echo at microphone
samples ``[start, start + n)`` from what the listener heard (a :class:`PlayedRing`): it
reads only listener samples at least ``delay_ms`` older, so it is causal, and it depends on
nothing but the heard timeline, so a lockstep replay is deterministic.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

from .reference import PlayedRing

__all__ = ["RoomEcho", "parse_echo"]


def parse_echo(spec: str) -> tuple[float, float]:
    """``"DELAY_MS,GAIN_DB"`` (e.g. ``"60,-6"``) → (delay_ms, gain_db); ValueError with a one-line reason."""
    parts = spec.split(",")
    if len(parts) != 2:
        raise ValueError(f"--echo takes DELAY_MS,GAIN_DB (e.g. 60,-6), not {spec!r}")
    try:
        delay, gain = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"--echo takes two numbers DELAY_MS,GAIN_DB (e.g. 60,-6), not {spec!r}") from None
    if not 1.0 <= delay <= 1000.0:
        raise ValueError(f"--echo delay must be 1 to 1000 ms, not {parts[0]}")
    if not -60.0 <= gain <= 12.0:
        raise ValueError(f"--echo gain must be -60 to 12 dB, not {parts[1]}")
    return delay, gain


class RoomEcho:
    """Speaker-to-microphone echo path (see the module docstring)."""

    def __init__(self, delay_ms: float, gain_db: float, *, rt60_ms: float = 200.0, tail_db: float = -12.0,
                 rate: int = SAMPLE_RATE, seed: int = 7) -> None:
        self.delay = max(1, int(round(delay_ms * rate / 1000)))
        self.gain_db = gain_db
        g = 10.0 ** (gain_db / 20.0)
        n_tail = int(rt60_ms * rate / 1000)
        rng = np.random.default_rng(seed)
        decay = 10.0 ** (-3.0 * np.arange(n_tail) / max(1, n_tail))  # -60 dB at rt60
        tail = rng.standard_normal(n_tail) * decay
        tail *= 10.0 ** (tail_db / 20.0) / max(1e-9, np.sqrt(np.sum(tail[: rate // 100] ** 2)))
        self.impulse = np.concatenate([[1.0], np.zeros(rate // 1000), tail]) * g  # taps after the delay
        self._fft_cache: dict[int, npt.NDArray[np.complex128]] = {}

    def echo(self, ring: PlayedRing, start: int, n: int) -> npt.NDArray[np.float64]:
        """Echo (float, int16 scale) at microphone samples ``[start, start + n)``."""
        taps = len(self.impulse)
        # y[m] = sum_k h[k] · x[m - delay - k]  for m in [start, start + n)
        lo = start - self.delay - taps + 1
        x = ring.read(lo, n + taps - 1).astype(np.float64)
        size = 1 << int(np.ceil(np.log2(len(x) + taps)))
        spectrum = self._fft_cache.get(size)
        if spectrum is None:
            spectrum = self._fft_cache[size] = np.fft.rfft(self.impulse, size)
        full = np.fft.irfft(np.fft.rfft(x, size) * spectrum, size)
        return full[taps - 1 : taps - 1 + n]

    def mix(self, mic: npt.NDArray[np.int16], ring: PlayedRing, start: int) -> npt.NDArray[np.int16]:
        """``mic`` (captured at listener samples ``start…``) plus the room's echo, clipped to int16."""
        out = mic.astype(np.float64) + self.echo(ring, start, len(mic))
        return np.clip(np.rint(out), -32768, 32767).astype(np.int16)
