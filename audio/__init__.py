"""voxline's media pipeline: int16 mono 24 kHz frames, clocks, sources, sinks, codecs,
resampling, and the playout buffer with its heard ledger (docs/design.md §4).

Imports nothing else of voxline but the shared primitives of :mod:`voxline.base` (the
clock, the audio format, the error), which it re-exports. Device input and output live in
``voxline.audio.devices``; :class:`MicSource`, :class:`SpeakerSink` and the device listing are
also named here, loaded on first use (PortAudio is needed only then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxline.base.clock import Clock, RealClock, VirtualClock
from voxline.base.errors import AudioError
from voxline.base.audio_format import PCM16_24K, PCMA_8K, PCMU_8K, SAMPLE_RATE, AudioFormat, Encoding
from voxline.audio.clocked_output import ClockedOutput, Output
from voxline.audio.codec import decode, encode
from voxline.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from voxline.audio.ledger import Cut, HeardItem, HeardLedger, Playing, fade_gains, heard_count
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.recording import Recording
from voxline.audio.resample import StreamResampler
from voxline.audio.sinks import NullSink, Sink, WavSink
from voxline.audio.sources import AudioFrame, SilenceSource, Source, WavFileSource
from voxline.audio.wavio import WavReader, WavWriter, read_wav, write_wav

__all__ = [
    "PCM16_24K",
    "PCMA_8K",
    "PCMU_8K",
    "SAMPLE_RATE",
    "AudioError",
    "AudioFormat",
    "AudioFrame",
    "ClockedOutput",
    "Clock",
    "Cut",
    "DeviceInfo",
    "Encoding",
    "HeardItem",
    "HeardLedger",
    "MicSource",
    "NullSink",
    "Output",
    "Playing",
    "PlayoutBuffer",
    "RealClock",
    "Recording",
    "SilenceSource",
    "Sink",
    "Source",
    "SpeakerSink",
    "StreamResampler",
    "VirtualClock",
    "WavFileSource",
    "WavReader",
    "WavSink",
    "WavWriter",
    "alaw_decode",
    "decode",
    "encode",
    "alaw_encode",
    "fade_gains",
    "heard_count",
    "list_devices",
    "read_wav",
    "ulaw_decode",
    "ulaw_encode",
    "write_wav",
]

if TYPE_CHECKING:  # each name as itself: an explicit export that mypy --strict and Pyright take
    from voxline.audio.devices import (DeviceInfo as DeviceInfo, MicSource as MicSource, SpeakerSink as SpeakerSink,
                                       list_devices as list_devices)
else:
    _DEVICES = frozenset({"DeviceInfo", "MicSource", "SpeakerSink", "list_devices"})

    def __getattr__(name: str) -> object:
        """The device classes, imported when first named."""
        if name in _DEVICES:
            from voxline.audio import devices

            return getattr(devices, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_DEVICES})
