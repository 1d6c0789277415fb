"""Double talk: is someone talking over the echo? Decided per band against the loudest echo possible.

:class:`EchoBound` is a plain synchronous DSP object. It is fed the *raw* microphone (before
any canceller) and the reference (what reached the listener over the same listener samples)
and says, every 10 ms, whether the microphone holds sound that the played reference cannot
explain. It needs no adaptive filter, so it answers from the first frames of a reply and of a
voice, before any canceller has converged or let the voice through.

How, per 10 ms frame (a Hann window over the last 20 ms, ``bands`` bands spaced evenly on a
log scale from ``low_hz`` to ``high_hz``):

* the **echo bound** of a band is the loudest reference power in that band over the frames
  the echo can come from, held after that with a decay of 60 dB per ``rt60_ms`` (the room's
  reverberant tail), times the band's **coupling**. Those frames are the last ``reach_ms``
  while the echo path's delay is not known, and from ``early_ms`` before to ``late_ms``
  after it once :attr:`EchoBound.delay_ms` is set (the session sets the echo-path monitor's
  last lag that found the path: a far tighter bound, so a voice stands out sooner);
* a band **stands out** when the microphone's power in it is at least ``margin_db`` above its
  bound and above ``band_floor_dbfs``; a frame is **near** when at least ``min_bands`` bands
  stand out and the power of those bands is at least ``floor_dbfs``;
* the coupling of a band (the echo's level against the reference's; ``coupling_db`` to start
  with, 0 dB: the microphone hears the echo no louder than what was played) is learned on
  frames that are not near while the reference plays: it rises at once to the largest
  mic-to-bound ratio seen and falls back by ``release_db_per_s``. An echo louder than assumed
  in a band or two is learned from the next frame; a frame with a voice over the echo is never
  learned from. A run of near frames longer than ``relearn_ms`` while the reference plays is
  learned from anyway: then the coupling was wrong everywhere, not the user talking that long.

Whether near sound is *speech* is the VAD's question (see
:class:`~voxline.audio.local_vad.LocalVad`). While nothing plays and the room's tail has died
away, no frame is near and nothing is computed: there is no echo to tell a voice from, and
the canceller then hands the voice on as it is. Work per
frame is bounded: two FFTs of 480 points and a few arrays of ``bands`` values (the reference's
band powers are kept for 600 ms).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["EchoBound"]

Samples = npt.NDArray[np.int16]
HOP = SAMPLE_RATE // 100  # 10 ms
WINDOW = 2 * HOP
_LONGEST_MS = 600  # the longest echo delay looked at once told (the echo-path monitor measures up to 500 ms)


class EchoBound:
    """Near sound over the echo, per 10 ms frame (see the module docstring)."""

    def __init__(self, *, reach_ms: int = 300, rt60_ms: float = 300.0, margin_db: float = 5.0, bands: int = 24,
                 low_hz: float = 200.0, high_hz: float = 10_000.0, min_bands: int = 2,
                 band_floor_dbfs: float = -75.0, floor_dbfs: float = -50.0, coupling_db: float = 0.0,
                 release_db_per_s: float = 3.0, relearn_ms: int = 1500,
                 early_ms: float = 20.0, late_ms: float = 50.0) -> None:
        if not (reach_ms >= 10 and rt60_ms > 0 and bands >= 1 and 0 < low_hz < high_hz <= SAMPLE_RATE / 2
                and 1 <= min_bands <= bands):
            raise ValueError("EchoBound needs reach_ms >= 10, rt60_ms > 0, 0 < low_hz < high_hz <= 12 kHz and "
                             "1 <= min_bands <= bands")
        edges = np.geomspace(low_hz, high_hz, bands + 1) * WINDOW / SAMPLE_RATE
        bins = np.arange(WINDOW // 2 + 1)
        window = np.hanning(WINDOW + 1)[:WINDOW]
        scale = float(np.sum(window**2)) * 32768.0**2 * WINDOW / 2  # a full-scale sine: 0 dBFS
        self._bank = np.zeros((len(bins), bands))  # bin power → band power, in dBFS terms
        for k in range(bands):
            self._bank[(bins >= edges[k]) & (bins < max(edges[k + 1], edges[k] + 1)), k] = 1.0 / scale
        self._bands = bands
        self._window = window
        self._reach = max(1, reach_ms // 10)
        self._size = max(self._reach, _LONGEST_MS // 10)  # frames of reference kept: any measured delay
        self._decay = 10.0 ** (-6.0 * 10.0 / rt60_ms)  # power, per 10 ms frame
        self._margin = 10.0 ** (margin_db / 10.0)
        self._band_floor = 10.0 ** (band_floor_dbfs / 10.0)
        self._floor = 10.0 ** (floor_dbfs / 10.0)
        self._min_bands = min_bands
        self._coupling0 = 10.0 ** (coupling_db / 10.0)
        self._release = 10.0 ** (-release_db_per_s / 100.0 / 10.0)
        self._relearn = max(1, relearn_ms // 10)
        self._early, self._late = early_ms, late_ms
        self.delay_ms: float | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the reference, the coupling and any partial frame."""
        self._buf = np.zeros((2, WINDOW))  # microphone and reference: the last window, then a partial frame
        self._history = np.zeros((self._size, self._bands))  # reference band powers, a ring by frame
        self._at = 0  # the ring's row of the newest frame
        self._held = np.zeros(self._bands)
        self._coupling = np.full(self._bands, self._coupling0)
        self._threshold = self._coupling * self._margin  # a band stands out above its bound times this
        self._lag_span: tuple[int, int] | None = None
        self._lag_rows = np.zeros(0, dtype=np.intp)
        self._run = 0
        self.frames = 0
        self.near_frames = 0

    @property
    def coupling_db(self) -> npt.NDArray[np.float64]:
        """The learned coupling of each band, dB."""
        return np.asarray(10.0 * np.log10(self._coupling), dtype=np.float64)

    def process(self, mic: Samples, ref: Samples) -> list[bool]:
        """One block of raw microphone and its reference (same length) → near? for each 10 ms frame completed."""
        if len(mic) != len(ref):
            raise ValueError(f"mic and ref must be blocks of one length, got {len(mic)} and {len(ref)}")
        # [mic | ref] rows: the last frame's window (and any partial frame), then the block
        kept = self._buf.shape[1]
        x = np.empty((2, kept + len(mic)))
        x[:, :kept] = self._buf
        x[0, kept:], x[1, kept:] = mic, ref
        frames = (x.shape[1] - WINDOW) // HOP
        out: list[bool] = []
        if frames and not np.any(x[1]) and float(self._held.max()) * self._decay < self._band_floor:
            for _ in range(frames):  # nothing plays nor rings on: no echo to tell a voice from, no FFT
                self._at = (self._at + 1) % self._size
                self._history[self._at] = 0.0
                self._held *= self._decay
                self._run = 0
            self.frames += frames
            out = [False] * frames
        elif frames:  # frame i's window ends HOP · (i + 1) samples after the kept window's start
            ends = range(WINDOW + HOP, WINDOW + HOP * frames + 1, HOP)
            windows = np.stack([x[:, e - WINDOW : e] for e in ends], axis=1) * self._window
            spectra = np.fft.rfft(windows, axis=-1)
            powers = (spectra.real**2 + spectra.imag**2) @ self._bank  # (2, frames, bands)
            out = [self._frame(powers[0, i], powers[1, i]) for i in range(frames)]
        self._buf = x[:, HOP * frames :].copy()
        return out

    def _lags(self) -> npt.NDArray[np.intp]:
        """How many frames ago the reference the echo now heard could have been played."""
        if self.delay_ms is None:  # any delay within reach
            lo, hi = 0, self._reach - 1
        else:  # the frames that held the reference the echo now heard left the speaker in
            lo = min(self._size - 1, max(0, int((self.delay_ms - self._early) // 10)))
            hi = min(self._size - 1, max(lo, int(-(-(self.delay_ms + self._late) // 10))))
        if self._lag_span != (lo, hi):
            self._lag_span, self._lag_rows = (lo, hi), np.arange(lo, hi + 1)
        return self._lag_rows

    def _frame(self, mic: npt.NDArray[np.float64], ref: npt.NDArray[np.float64]) -> bool:
        self.frames += 1
        self._at = (self._at + 1) % self._size
        self._history[self._at] = ref
        direct = self._history[(self._at - self._lags()) % self._size].max(axis=0)
        held = self._held = np.maximum(direct, self._held * self._decay)
        out = (mic >= held * self._threshold) & (mic >= self._band_floor)
        near = int(np.count_nonzero(out)) >= self._min_bands and float(np.sum(mic[out])) >= self._floor
        active = held >= self._band_floor
        playing = bool(active.any())
        self._run = self._run + 1 if near and playing else 0
        if playing and (not near or self._run >= self._relearn):
            # learn: at once up to the ratio seen, slowly down, in the bands the reference reaches
            ratio = mic / np.maximum(held, 1e-30)
            self._coupling[active] = np.maximum(self._coupling[active] * self._release, ratio[active])
            self._threshold = self._coupling * self._margin
        self.near_frames += near
        return near
