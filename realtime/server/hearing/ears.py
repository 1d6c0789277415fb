"""The server's ears: one recogniser for every session, chosen when the server starts.

``hearing="auto"`` (the default) hears when ``voxline[asr]`` is installed and goes without it
otherwise; ``"on"`` requires it (a one-line :class:`ConfigurationError` when it is missing);
``"off"`` never hears. The model loads on the first utterance (about half a second), once per
process, so a server that never hears pays nothing. :meth:`Ears.hear` is blocking: drivers call
it in a worker thread, never on the event loop.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
import soxr

from voxline.base.audio_format import AudioFormat
from voxline.realtime.errors import ConfigurationError, UsageError
from voxline.realtime.server.engine.wire_audio import to_pcm
from voxline.realtime.server.hearing import whisper
from voxline.realtime.server.hearing.features import FRAMES, HOP, RATE

__all__ = ["HEARING_MODES", "Ears", "HearingMode", "Transcriber", "load_ears"]

HearingMode = Literal["auto", "on", "off"]
HEARING_MODES: tuple[HearingMode, ...] = ("auto", "on", "off")
_WINDOW = FRAMES * HOP  # samples the model takes at once (30 s)


class Transcriber(Protocol):
    """Text from float32 samples at 16 kHz (at most 30 s), biased towards ``phrases``."""

    def transcribe(self, samples: npt.NDArray[np.float32], phrases: Sequence[str] = ()) -> str: ...


class Ears:
    """A transcriber, made by ``load`` when first needed, and what it is (``name``, for the banner)."""

    def __init__(self, load: Callable[[], Transcriber], name: str) -> None:
        self._load = load
        self._transcriber: Transcriber | None = None
        self._lock = threading.Lock()
        self.name = name

    def _model(self) -> Transcriber:
        with self._lock:
            if self._transcriber is None:
                self._transcriber = self._load()
            return self._transcriber

    def hear(self, audio: bytes, fmt: AudioFormat, phrases: Sequence[str] = ()) -> str:
        """The words in ``audio`` (wire bytes in ``fmt``); longer speech is heard 30 s at a time."""
        pcm = to_pcm(audio, fmt).astype(np.float32) / 32768.0
        samples = pcm if fmt.rate == RATE else soxr.resample(pcm, fmt.rate, RATE, quality="HQ")
        model = self._model()
        texts = [model.transcribe(np.ascontiguousarray(samples[i : i + _WINDOW], np.float32), phrases)
                 for i in range(0, samples.size, _WINDOW)]
        return " ".join(t for t in texts if t)


def load_ears(mode: str) -> Ears | None:
    """The recogniser ``mode`` asks for (loaded when it first hears), or ``None``."""
    if mode not in HEARING_MODES:
        raise UsageError(f"unknown hearing mode {mode!r}; use auto, on or off")
    if mode == "off":
        return None
    missing = whisper.missing()
    if missing is not None:
        if mode == "on":
            raise ConfigurationError(f"speech recognition needs voxline[asr] ({missing} is not installed): "
                                     "pip install 'voxline[asr]' (in a clone: uv run --no-dev --extra asr voxline …)")
        return None
    return _shared()


@functools.cache
def _shared() -> Ears:
    """One recogniser a process: the model is read-only, and its lock serialises the callers."""
    return Ears(whisper.load, "Whisper tiny.en")
