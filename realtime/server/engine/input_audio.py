"""The input audio buffer and its voice activity detection, in buffer time.

Positions are sample indices over all audio appended during the session (what
``audio_start_ms`` / ``audio_end_ms`` count), at the input format's own rate:
24 kHz for ``audio/pcm``, 8 kHz for ``audio/pcmu`` / ``audio/pcma``.

``server_vad`` runs :class:`voxline.audio.vad.EnergyVad` with the session's threshold,
prefix padding and silence duration. ``semantic_vad`` is approximated by the same
detector with a silence duration chosen by ``eagerness`` (low 1200 ms,
medium/auto 800 ms, high 400 ms), since the server understands no speech.
"""

from __future__ import annotations

from typing import Any

from voxline.audio.vad import EnergyVad, SpeechStart, SpeechStop, VadEvent
from voxline.base.audio_format import PCM16_24K, AudioFormat
from voxline.realtime.server.engine import wire_audio

__all__ = ["InputAudio", "SpeechStart", "SpeechStop", "VadEvent"]

_SILENCE_KEPT_MS = 10_000
_PADDING_KEPT_MS = 60_000  # the most of a speech start's prefix padding kept while silent
_SEMANTIC_SILENCE_MS = {"low": 1200, "medium": 800, "auto": 800, "high": 400}


class InputAudio:
    """``input_audio_buffer``: appended bytes, commit/clear, and VAD events."""

    def __init__(self, fmt: AudioFormat = PCM16_24K, turn_detection: dict[str, Any] | None = None) -> None:
        self._format = fmt
        self._buffer = bytearray()
        self._base = 0  # session sample index of the buffer's first sample
        self._position = 0  # session samples appended so far
        self._vad: EnergyVad | None = None
        self._vad_origin = 0
        self._tail = b""  # an odd trailing byte of PCM16 not yet a whole sample
        self.configure(fmt, turn_detection)

    @property
    def format(self) -> AudioFormat:
        return self._format

    @property
    def bytes_per_ms(self) -> float:
        return self._format.bytes_per_ms

    @property
    def buffered_ms(self) -> float:
        return len(self._buffer) / self.bytes_per_ms

    @property
    def buffer_start(self) -> int:
        """Session sample index of the first buffered sample."""
        return self._base

    @property
    def position(self) -> int:
        """Session samples appended so far."""
        return self._position

    @property
    def speaking(self) -> bool:
        return self._vad is not None and self._vad.speaking

    def ms(self, sample: int) -> int:
        """Session milliseconds of a sample position."""
        return sample * 1000 // self._format.rate

    def configure(self, fmt: AudioFormat, turn_detection: dict[str, Any] | None) -> None:
        """Apply the session's input format and turn detection (VAD state is kept when possible)."""
        if fmt != self._format:
            self._format = fmt
            self._vad = None
        if turn_detection is None:
            self._vad = None
            return
        threshold = float(turn_detection.get("threshold", 0.5))
        padding = int(turn_detection.get("prefix_padding_ms", 300))
        silence = int(turn_detection.get("silence_duration_ms", 500))
        if turn_detection["type"] == "semantic_vad":
            silence = _SEMANTIC_SILENCE_MS[turn_detection.get("eagerness", "auto")]
        if self._vad is None:
            self._vad = EnergyVad(
                sample_rate=self._format.rate,
                threshold=threshold,
                prefix_padding_ms=padding,
                silence_duration_ms=silence,
            )
            self._vad_origin = self._position
        else:
            self._vad.configure(threshold=threshold, prefix_padding_ms=padding, silence_duration_ms=silence)

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def trim_silence(self) -> None:
        """With VAD on and no speech in progress, keep only the audio a coming speech start may reach back to.

        That is the prefix padding (at most :data:`_PADDING_KEPT_MS`: a padding of hours would fill the
        buffer with silence until it refused audio) plus :data:`_SILENCE_KEPT_MS`: the service does not keep
        hours of silence either, and without this an idle session's buffer would grow forever.
        """
        if self._vad is None or self._vad.speaking:
            return
        width = self._format.bytes_per_sample
        rate = self._format.rate
        keep = min(self._vad.prefix_padding, rate * _PADDING_KEPT_MS // 1000) + rate * _SILENCE_KEPT_MS // 1000
        excess = len(self._buffer) // width - keep
        if excess > 0:
            del self._buffer[: excess * width]
            self._base += excess

    def append(self, data: bytes) -> list[VadEvent]:
        """Add audio; return VAD events with session sample positions."""
        self.trim_silence()
        self._buffer.extend(data)
        raw = self._tail + data
        usable = len(raw) - len(raw) % self._format.bytes_per_sample
        self._tail = raw[usable:]
        samples = wire_audio.to_pcm(raw[:usable], self._format)
        self._position += samples.size
        if self._vad is None:
            return []
        origin = self._vad_origin
        events: list[VadEvent] = []
        for ev in self._vad.process(samples):
            match ev:
                case SpeechStart():
                    events.append(SpeechStart(onset=ev.onset + origin, start=ev.start + origin))
                case SpeechStop():
                    events.append(SpeechStop(end=ev.end + origin, last_voiced=ev.last_voiced + origin))
        return events

    def take_all(self) -> bytes:
        """Manual commit: everything buffered; any speech in progress is forgotten."""
        data = bytes(self._buffer)
        self._reset_buffer()
        return data

    def take_segment(self, start: int, end: int) -> bytes:
        """VAD commit: samples ``[start, end)``; audio before is dropped, audio after stays."""
        width = self._format.bytes_per_sample
        lo = max(0, (start - self._base) * width)
        hi = max(lo, min(len(self._buffer), (end - self._base) * width))
        data = bytes(self._buffer[lo:hi])
        del self._buffer[:hi]
        self._base = max(self._base, end)
        return data

    def clear(self) -> None:
        """``input_audio_buffer.clear``: drop the buffer and any speech in progress."""
        self._reset_buffer()

    def _reset_buffer(self) -> None:
        self._buffer.clear()
        self._base = self._position
        self._tail = b""
        if self._vad is not None:
            self._vad.reset()
