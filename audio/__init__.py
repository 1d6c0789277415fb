"""voxline's media pipeline: int16 mono 24 kHz frames, clocks, sources, sinks, codecs,
resampling, and the playout buffer with its heard ledger (DESIGN.md, audio/).

Imports nothing else of voxline. Device input and output live in ``audio.devices``
(not imported here, so that this package works without PortAudio).
"""

from __future__ import annotations

from audio.clock import Clock, RealClock, VirtualClock
from audio.errors import AudioError
from audio.format import PCM16_24K, PCMA_8K, PCMU_8K, SAMPLE_RATE, AudioFormat, Encoding
from audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from audio.ledger import Cut, HeardItem, HeardLedger, Playing, fade_gains, heard_count
from audio.playout import PlayoutBuffer
from audio.resample import StreamResampler
from audio.sinks import NullSink, Sink, WavSink
from audio.sources import AudioFrame, SilenceSource, Source, WavFileSource
from audio.wavio import WavReader, WavWriter, read_wav, write_wav

__all__ = [
    "PCM16_24K",
    "PCMA_8K",
    "PCMU_8K",
    "SAMPLE_RATE",
    "AudioError",
    "AudioFormat",
    "AudioFrame",
    "Clock",
    "Cut",
    "Encoding",
    "HeardItem",
    "HeardLedger",
    "NullSink",
    "Playing",
    "PlayoutBuffer",
    "RealClock",
    "SilenceSource",
    "Sink",
    "Source",
    "StreamResampler",
    "VirtualClock",
    "WavFileSource",
    "WavReader",
    "WavSink",
    "WavWriter",
    "alaw_decode",
    "alaw_encode",
    "fade_gains",
    "heard_count",
    "read_wav",
    "ulaw_decode",
    "ulaw_encode",
    "write_wav",
]
