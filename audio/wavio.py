"""WAV files in and out, through the standard library's ``wave`` module.

Reading accepts integer PCM of 8, 16, 24 or 32 bits and any number of channels, and
yields int16 mono (channels averaged; wider samples keep their top 16 bits). Float WAV
files and WAVE_FORMAT_EXTENSIBLE headers are refused, as ``wave`` does not read them;
convert with ``sox in.wav -b 16 -e signed-integer out.wav``. Writing is int16 mono.
Every failure is an :class:`~voxline.base.errors.AudioError` with a one-line message.
"""

from __future__ import annotations

import os
import wave
from types import TracebackType
from typing import Self

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

__all__ = ["WavReader", "WavWriter", "read_wav", "write_wav"]

Samples = npt.NDArray[np.int16]
PathLike = str | os.PathLike[str]


def _reason(error: BaseException) -> str:
    match error:
        case EOFError():
            return "the file is empty or truncated"
        case wave.Error():
            return f"not an integer PCM WAV file ({error}); convert it to 16-bit PCM"
        case OSError():
            return error.strerror or type(error).__name__
        case _:
            return str(error)


def _frames_to_int16(raw: bytes, width: int, channels: int) -> Samples:
    """Interleaved little-endian PCM of ``width`` bytes to int16 of shape (frames, channels)."""
    data = np.frombuffer(raw, dtype=np.uint8)
    match width:
        case 1:
            wide = (data.astype(np.int16) - 128) << 8
        case 2:
            wide = data.view("<i2").astype(np.int16)
        case 3:
            triples = data.reshape(-1, 3)
            wide = (triples[:, 2].astype(np.int8).astype(np.int16) << 8) | triples[:, 1].astype(np.int16)
        case 4:
            wide = (data.view("<i4") >> 16).astype(np.int16)
        case _:
            raise AudioError(f"unsupported WAV sample width of {width} bytes")
    return wide.reshape(-1, channels)


def _downmix(frames: Samples) -> Samples:
    if frames.shape[1] == 1:
        return frames[:, 0]
    return np.rint(frames.mean(axis=1)).astype(np.int16)


class WavReader:
    """An open WAV file read in blocks of int16 mono samples at the file's own rate."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "rb")
        except OSError as error:
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        try:
            self._wave = wave.open(self._file, "rb")
        except (wave.Error, EOFError, OSError) as error:
            self._file.close()
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        self.rate: int = self._wave.getframerate()
        self.channels: int = self._wave.getnchannels()
        self.sample_width: int = self._wave.getsampwidth()
        self.frames: int = self._wave.getnframes()
        if self.sample_width not in (1, 2, 3, 4) or self.channels < 1 or self.rate <= 0:
            self.close()
            raise AudioError(
                f"cannot read {self.path}: unsupported WAV layout "
                f"({self.sample_width * 8}-bit, {self.channels} channels, {self.rate} Hz)"
            )

    @property
    def duration(self) -> float:
        return self.frames / self.rate

    def read(self, frames: int) -> Samples:
        """Up to ``frames`` mono samples; an empty array at the end of the file."""
        try:
            raw = self._wave.readframes(frames)
        except (wave.Error, EOFError, OSError) as error:
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        usable = len(raw) - len(raw) % (self.sample_width * self.channels)
        return _downmix(_frames_to_int16(raw[:usable], self.sample_width, self.channels))

    def close(self) -> None:
        self._wave.close()
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class WavWriter:
    """A 16-bit mono WAV file written incrementally; the header is completed on close."""

    def __init__(self, path: PathLike, rate: int = SAMPLE_RATE) -> None:
        self.path = os.fspath(path)
        self.rate = rate
        self.frames_written = 0
        try:
            self._file = open(self.path, "wb")
        except OSError as error:
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error
        try:
            self._wave = wave.open(self._file, "wb")
            self._wave.setnchannels(1)
            self._wave.setsampwidth(2)
            self._wave.setframerate(rate)
        except (wave.Error, OSError) as error:
            self._file.close()
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error

    def write(self, samples: Samples) -> None:
        array = np.asarray(samples)
        if array.dtype != np.int16 or array.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {array.dtype} with shape {array.shape}")
        try:
            self._wave.writeframes(array.astype("<i2", copy=False).tobytes())
        except OSError as error:
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error
        self.frames_written += len(array)

    def close(self) -> None:
        try:
            self._wave.close()
            self._file.close()
        except OSError as error:
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def read_wav(path: PathLike) -> tuple[Samples, int]:
    """The whole file as int16 mono samples, and its sample rate."""
    with WavReader(path) as reader:
        return reader.read(reader.frames), reader.rate


def write_wav(path: PathLike, samples: Samples, rate: int = SAMPLE_RATE) -> None:
    """Write int16 mono samples as a 16-bit PCM WAV file."""
    with WavWriter(path, rate) as writer:
        writer.write(samples)
