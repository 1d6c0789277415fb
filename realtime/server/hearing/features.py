"""Whisper's input: an 80-band log-mel spectrogram of 16 kHz speech, in plain numpy.

The model was trained on these exact features, so they follow its recipe: a periodic Hann
window of 400 samples (25 ms) every 160 samples (10 ms) over the signal reflected at both ends,
the power spectrum folded by a Slaney-style mel filter bank (80 triangles, 0–8 kHz, each
normalised by its width), ``log10`` floored at 8 decades below the loudest value, then scaled
to roughly ``[-1, 1]`` by ``(x + 4) / 4``. One frame per 10 ms; the encoder sees 3000 frames
(30 s), so shorter speech is padded with silence first.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

__all__ = ["FRAMES", "RATE", "log_mel", "mel_filters"]

RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 80
FRAMES = 3000  # 30 s: the window the model was trained on
Floats = npt.NDArray[np.float32]


def _hz_to_mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Slaney's mel scale: linear below 1 kHz (3 mel per 200 Hz), logarithmic above."""
    linear = hz * 3.0 / 200.0
    step = np.log(6.4) / 27.0
    return np.where(hz >= 1000.0, 15.0 + np.log(np.maximum(hz, 1e-9) / 1000.0) / step, linear)


def _mel_to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    step = np.log(6.4) / 27.0
    return np.where(mel >= 15.0, 1000.0 * np.exp(step * (mel - 15.0)), mel * 200.0 / 3.0)


@functools.cache
def mel_filters() -> npt.NDArray[np.float64]:
    """The ``(80, 201)`` filter bank: triangles evenly spaced in mel, area-normalised."""
    bins = np.linspace(0.0, RATE / 2.0, N_FFT // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(np.array(0.0)), _hz_to_mel(np.array(RATE / 2.0)), N_MELS + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins[None, :] - lower) / (centre - lower)
    falling = (upper - bins[None, :]) / (upper - centre)
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    filters: npt.NDArray[np.float64] = triangles * (2.0 / (upper - lower))
    return filters


@functools.cache
def _window() -> npt.NDArray[np.float64]:
    n = np.arange(N_FFT)
    window: npt.NDArray[np.float64] = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)  # periodic
    return window


def log_mel(samples: npt.NDArray[np.float32], frames: int = FRAMES) -> Floats:
    """Features of ``samples`` (float32 in [-1, 1] at 16 kHz), padded or cut to ``frames`` frames."""
    audio = np.zeros(frames * HOP, np.float64)
    usable = min(samples.size, audio.size)
    audio[:usable] = samples[:usable]
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    starts = np.arange(frames) * HOP
    windows = padded[starts[:, None] + np.arange(N_FFT)[None, :]] * _window()
    power = np.abs(np.fft.rfft(windows, axis=1)) ** 2  # (frames, 201)
    mel = mel_filters() @ power.T  # (80, frames)
    logs = np.log10(np.maximum(mel, 1e-10))
    logs = np.maximum(logs, logs.max() - 8.0)
    out: Floats = ((logs + 4.0) / 4.0).astype(np.float32)
    return out
