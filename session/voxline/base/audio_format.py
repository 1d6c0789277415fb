"""Audio formats of the GA Realtime API (``session.audio.{input,output}.format``).

One frozen :class:`AudioFormat`, normalised once at the edge from the wire shape, and the
pipeline's one sample rate, :data:`SAMPLE_RATE`:

* ``{"type": "audio/pcm", "rate": 24000}`` — PCM16 little-endian mono at 24 kHz
* ``{"type": "audio/pcmu"}`` — G.711 µ-law, 8 kHz, one byte per sample
* ``{"type": "audio/pcma"}`` — G.711 A-law, 8 kHz, one byte per sample

The beta spellings (``"pcm16"``, ``"g711_ulaw"``, ``"g711_alaw"``) are refused with an
error naming the GA form. Encoding and decoding samples is the media pipeline's job
(:mod:`voxline.audio.codec`); this module only describes formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, assert_never

from voxline.base.errors import AudioError

__all__ = ["PCM16_24K", "PCMA_8K", "PCMU_8K", "SAMPLE_RATE", "AudioFormat", "Encoding", "output_format_of"]

Encoding = Literal["pcm16", "pcmu", "pcma"]

SAMPLE_RATE = 24000  # the internal rate of the whole pipeline: int16 mono at 24 kHz

_RATES: dict[str, int] = {"pcm16": SAMPLE_RATE, "pcmu": 8000, "pcma": 8000}
_FROM_WIRE_TYPE: dict[str, Encoding] = {"audio/pcm": "pcm16", "audio/pcmu": "pcmu", "audio/pcma": "pcma"}
_GA_SPELLING: dict[Encoding, str] = {
    "pcm16": '{"type": "audio/pcm", "rate": 24000}',
    "pcmu": '{"type": "audio/pcmu"}',
    "pcma": '{"type": "audio/pcma"}',
}
_BETA_NAMES: dict[str, Encoding] = {"pcm16": "pcm16", "g711_ulaw": "pcmu", "g711_alaw": "pcma"}


def _beta_error(name: str) -> AudioError:
    ga = _GA_SPELLING[_BETA_NAMES[name]]
    return AudioError(f"audio format {name!r} is the beta spelling; the GA API takes {ga}")


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """A wire audio format: encoding, sample rate (fixed by the encoding) and one channel."""

    encoding: Encoding
    rate: int
    channels: int = 1

    def __post_init__(self) -> None:
        expected = _RATES.get(self.encoding)
        if expected is None:
            raise AudioError(f"unknown audio encoding {self.encoding!r}; expected pcm16, pcmu or pcma")
        if self.rate != expected:
            raise AudioError(f"{self.encoding} audio is {expected} Hz only, not {self.rate} Hz")
        if self.channels != 1:
            raise AudioError(f"realtime audio is mono, not {self.channels} channels")

    @classmethod
    def from_wire(cls, value: object) -> AudioFormat:
        """Normalise a GA ``format`` object (an :class:`AudioFormat` is returned as is)."""
        if isinstance(value, AudioFormat):
            return value
        if isinstance(value, str):
            if value in _BETA_NAMES:
                raise _beta_error(value)
            raise AudioError(f"audio format must be an object such as {_GA_SPELLING['pcm16']}, not {value!r}")
        if not isinstance(value, Mapping):
            raise AudioError(f"audio format must be an object such as {_GA_SPELLING['pcm16']}")
        return cls._from_mapping(value)

    @classmethod
    def _from_mapping(cls, value: Mapping[object, object]) -> AudioFormat:
        kind = value.get("type")
        if isinstance(kind, str) and kind in _BETA_NAMES:
            raise _beta_error(kind)
        if not isinstance(kind, str) or kind not in _FROM_WIRE_TYPE:
            raise AudioError(f"unknown audio format type {kind!r}; expected audio/pcm, audio/pcmu or audio/pcma")
        extra = sorted(str(key) for key in value if key not in ("type", "rate"))
        if extra:
            raise AudioError(f"unknown audio format field(s) {', '.join(extra)}")
        encoding = _FROM_WIRE_TYPE[kind]
        rate = value.get("rate", _RATES[encoding])
        if isinstance(rate, bool) or not isinstance(rate, int) or rate != _RATES[encoding]:
            raise AudioError(f"{kind} audio is {_RATES[encoding]} Hz only, not {rate!r}")
        return cls(encoding, rate)

    def to_wire(self) -> dict[str, object]:
        """The GA ``format`` object."""
        match self.encoding:
            case "pcm16":
                return {"type": "audio/pcm", "rate": self.rate}
            case "pcmu":
                return {"type": "audio/pcmu"}
            case "pcma":
                return {"type": "audio/pcma"}
            case _:
                assert_never(self.encoding)

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self.encoding == "pcm16" else 1

    @property
    def bytes_per_ms(self) -> float:
        """48.0 for PCM16 at 24 kHz, 8.0 for G.711."""
        return self.rate * self.bytes_per_sample * self.channels / 1000

    def samples_to_ms(self, samples: int) -> float:
        return samples * 1000 / self.rate

    def ms_to_samples(self, ms: float) -> int:
        """Nearest whole number of samples for a duration in milliseconds."""
        return round(ms * self.rate / 1000)

    def bytes_to_ms(self, nbytes: int) -> float:
        return nbytes / self.bytes_per_ms

    @classmethod
    def from_type(cls, kind: object) -> AudioFormat:
        """The format of a wire ``type`` string alone (``audio/pcm`` is 24 kHz)."""
        return cls._from_mapping({"type": kind})


PCM16_24K = AudioFormat("pcm16", SAMPLE_RATE)
PCMU_8K = AudioFormat("pcmu", 8000)
PCMA_8K = AudioFormat("pcma", 8000)


def output_format_of(audio: object) -> AudioFormat | None:
    """The output format a session's ``audio`` object names (``audio.output.format``).

    ``None`` when it names none, or one that cannot be read: the one reading of a session's
    output format, for the protocol core and the conversation mirror alike.
    """
    output = audio.get("output") if isinstance(audio, Mapping) else None
    value = output.get("format") if isinstance(output, Mapping) else None
    if value is None:
        return None
    try:
        return AudioFormat.from_wire(value)
    except (AudioError, TypeError, ValueError):
        return None
