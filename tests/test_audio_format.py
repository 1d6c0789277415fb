"""AudioFormat: the GA wire shapes, normalised once; beta spellings refused."""

from __future__ import annotations

import numpy as np
import pytest

from voxline.base.errors import AudioError
from voxline.audio import codec
from voxline.base.audio_format import PCM16_24K, PCMA_8K, PCMU_8K, AudioFormat


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"type": "audio/pcm", "rate": 24000}, PCM16_24K),
        ({"type": "audio/pcm"}, PCM16_24K),
        ({"type": "audio/pcmu"}, PCMU_8K),
        ({"type": "audio/pcma"}, PCMA_8K),
        ({"type": "audio/pcmu", "rate": 8000}, PCMU_8K),
    ],
)
def test_ga_shapes_are_accepted(wire: dict[str, object], expected: AudioFormat) -> None:
    assert AudioFormat.from_wire(wire) == expected


def test_to_wire_gives_the_ga_shape_back() -> None:
    assert PCM16_24K.to_wire() == {"type": "audio/pcm", "rate": 24000}
    assert PCMU_8K.to_wire() == {"type": "audio/pcmu"}
    assert PCMA_8K.to_wire() == {"type": "audio/pcma"}
    for fmt in (PCM16_24K, PCMU_8K, PCMA_8K):
        assert AudioFormat.from_wire(fmt.to_wire()) == fmt
    assert AudioFormat.from_wire(PCMU_8K) is PCMU_8K


@pytest.mark.parametrize(
    ("beta", "ga"),
    [("pcm16", '"audio/pcm", "rate": 24000'), ("g711_ulaw", '"audio/pcmu"'), ("g711_alaw", '"audio/pcma"')],
)
def test_beta_strings_are_refused_naming_the_ga_form(beta: str, ga: str) -> None:
    with pytest.raises(AudioError, match="beta") as err:
        AudioFormat.from_wire(beta)
    assert ga in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(AudioError, match="beta"):
        AudioFormat.from_wire({"type": beta})


@pytest.mark.parametrize(
    "wire",
    [
        {"type": "audio/pcm", "rate": 16000},
        {"type": "audio/pcm", "rate": "24000"},
        {"type": "audio/pcm", "rate": True},
        {"type": "audio/pcmu", "rate": 24000},
        {"type": "audio/opus"},
        {"rate": 24000},
        {"type": "audio/pcm", "channels": 2},
        42,
        "audio/pcm",
    ],
)
def test_other_shapes_are_refused(wire: object) -> None:
    with pytest.raises(AudioError):
        AudioFormat.from_wire(wire)


def test_direct_construction_checks_rate_and_channels() -> None:
    with pytest.raises(AudioError, match="24000 Hz only"):
        AudioFormat("pcm16", 16000)
    with pytest.raises(AudioError, match="mono"):
        AudioFormat("pcmu", 8000, channels=2)


def test_sizes_and_durations() -> None:
    assert PCM16_24K.bytes_per_ms == 48.0
    assert PCMU_8K.bytes_per_ms == 8.0
    assert PCM16_24K.samples_to_ms(480) == 20.0
    assert PCMA_8K.samples_to_ms(160) == 20.0
    assert PCM16_24K.ms_to_samples(20) == 480
    assert PCMU_8K.ms_to_samples(12.5) == 100
    assert PCM16_24K.bytes_to_ms(4800) == 100.0


def test_pcm16_decode_is_little_endian_and_round_trips() -> None:
    assert codec.decode(PCM16_24K, b"\x01\x00\x00\x80").tolist() == [1, -32768]
    samples = np.array([0, 1, -1, 32767, -32768], dtype=np.int16)
    assert codec.encode(PCM16_24K, samples) == b"\x00\x00\x01\x00\xff\xff\xff\x7f\x00\x80"
    assert codec.decode(PCM16_24K, codec.encode(PCM16_24K, samples)).tolist() == samples.tolist()
    with pytest.raises(AudioError, match="odd"):
        codec.decode(PCM16_24K, b"\x00\x00\x00")
    with pytest.raises(TypeError):
        codec.encode(PCM16_24K, np.zeros(3, dtype=np.float64))  # type: ignore[arg-type]


def test_g711_formats_use_one_byte_per_sample() -> None:
    samples = np.array([0, 1000, -1000], dtype=np.int16)
    assert len(codec.encode(PCMU_8K, samples)) == 3
    assert codec.encode(PCMA_8K, samples) == bytes([0xD5, 0xFA, 0x7A])
    decoded = codec.decode(PCMU_8K, codec.encode(PCMU_8K, samples))
    assert decoded.dtype == np.int16 and np.abs(decoded.astype(int) - samples).max() < 40
