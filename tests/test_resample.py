"""StreamResampler: streaming output length and frequency are preserved."""

from __future__ import annotations

import numpy as np
import pytest

from voxline.audio.resample import StreamResampler


def sine(freq: float, rate: int, seconds: float, amplitude: float = 12000.0) -> np.ndarray:
    n = int(rate * seconds)
    return (amplitude * np.sin(2 * np.pi * freq * np.arange(n) / rate)).astype(np.int16)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


def feed_in_chunks(resampler: StreamResampler, samples: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    pos = 0
    while pos < len(samples):
        size = int(rng.integers(1, 2000))
        out.append(resampler.process(samples[pos : pos + size]))
        pos += size
    out.append(resampler.flush())
    return np.concatenate(out)


@pytest.mark.parametrize(("in_rate", "out_rate"), [(44100, 24000), (48000, 24000), (8000, 24000), (24000, 16000)])
def test_total_length_converges_to_the_rate_ratio(in_rate: int, out_rate: int) -> None:
    samples = sine(440.0, in_rate, 1.3)
    out = feed_in_chunks(StreamResampler(in_rate, out_rate), samples, seed=in_rate)
    assert out.dtype == np.int16
    assert abs(len(out) - len(samples) * out_rate / in_rate) <= 1


@pytest.mark.parametrize(("in_rate", "out_rate", "freq"), [(44100, 24000, 1000.0), (8000, 24000, 700.0), (24000, 48000, 3000.0)])
def test_a_sine_keeps_its_frequency(in_rate: int, out_rate: int, freq: float) -> None:
    out = feed_in_chunks(StreamResampler(in_rate, out_rate), sine(freq, in_rate, 1.0), seed=1)
    steady = out[len(out) // 4 : 3 * len(out) // 4]
    assert abs(dominant_frequency(steady, out_rate) - freq) < 3.0
    rms = np.sqrt(np.mean(steady.astype(np.float64) ** 2))
    assert 12000 / np.sqrt(2) * 0.97 < rms < 12000 / np.sqrt(2) * 1.03


def test_equal_rates_pass_samples_through() -> None:
    resampler = StreamResampler(24000, 24000)
    chunk = np.arange(100, dtype=np.int16)
    assert resampler.identity
    assert resampler.process(chunk) is chunk
    assert len(resampler.flush()) == 0


def test_flushed_stream_must_be_reset_before_reuse() -> None:
    resampler = StreamResampler(48000, 24000)
    resampler.process(sine(440.0, 48000, 0.1), last=True)
    with pytest.raises(RuntimeError, match="reset"):
        resampler.process(np.zeros(10, dtype=np.int16))
    resampler.reset()
    out = feed_in_chunks(resampler, sine(440.0, 48000, 0.5), seed=3)
    assert abs(len(out) - 12000) <= 1


def test_only_1d_int16_is_accepted() -> None:
    with pytest.raises(TypeError):
        StreamResampler(48000, 24000).process(np.zeros(10, dtype=np.float32))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StreamResampler(48000, 24000).process(np.zeros((10, 2), dtype=np.int16))
    with pytest.raises(ValueError):
        StreamResampler(0, 24000)
