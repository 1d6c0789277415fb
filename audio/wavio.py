"""WAV files in and out.

Reading parses the RIFF chunks itself: integer PCM of 8, 16, 24 or 32 bits, IEEE float of
32 or 64 bits, G.711 µ-law or A-law (telephone recordings), plain or WAVE_FORMAT_EXTENSIBLE headers, any number of channels, in a RIFF file or
an RF64/BW64 one (the 64-bit sizes of files over 4 GiB). It yields
int16 mono (channels averaged; wider integers keep their top 16 bits, floats are scaled and
clipped, G.711 codes decoded as :mod:`voxline.audio.g711` does); :attr:`WavReader.conversion` says when samples were converted. Writing (through
the standard library's ``wave``) is int16 mono. Every failure is an
:class:`~voxline.base.errors.AudioError` with a one-line message.

A header is not taken on trust: a rate outside 4 kHz–768 kHz, more than 64 channels or a fmt
chunk larger than a few kilobytes is refused, and so is a data chunk shorter than its header
says (a file cut short), unless the size is the streaming placeholder ``0xFFFFFFFF`` (a
recorder that never came back to write it): then what is there is read. Nothing is allocated
from a header's figures: reading is in blocks of what the file holds.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import wave
from types import TracebackType
from typing import Self

import numpy as np
import numpy.typing as npt

from voxline.audio.g711 import alaw_decode, ulaw_decode
from voxline.base.arguments import whole
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

__all__ = ["MAX_WAV_BYTES", "WavReader", "WavWriter", "read_wav", "write_wav"]

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


PCM, IEEE_FLOAT, ALAW, MULAW, EXTENSIBLE = 0x0001, 0x0003, 0x0006, 0x0007, 0xFFFE
_G711 = {ALAW: alaw_decode, MULAW: ulaw_decode}  # telephone recordings: 8-bit codes, decoded by table
_KIND = {PCM: "integer", IEEE_FLOAT: "float", ALAW: "A-law", MULAW: "µ-law"}
MIN_RATE, MAX_RATE = 4_000, 768_000  # a header outside these is a damaged or hostile file, not audio
MAX_CHANNELS = 64
MAX_FMT_BYTES = 4096  # WAVE_FORMAT_EXTENSIBLE needs 40
UNKNOWN_SIZE = 0xFFFFFFFF  # what a streaming writer leaves in a header it never finished
_WIDE = (b"RF64", b"BW64")  # WAV over 4 GiB (EBU 3306, ITU BS.2088): 64-bit sizes in a ds64 chunk
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"  # KSDATAFORMAT_SUBTYPE_*


def _frames_to_int16(raw: bytes, width: int, channels: int, tag: int = PCM) -> Samples:
    """Interleaved little-endian samples of ``width`` bytes (``tag``: their encoding) to int16 of shape
    (frames, channels)."""
    data = np.frombuffer(raw, dtype=np.uint8)
    if tag in _G711:
        return _G711[tag](data).reshape(-1, channels)
    if tag == IEEE_FLOAT:
        values = data.view("<f4" if width == 4 else "<f8").astype(np.float64)
        values = np.nan_to_num(values, nan=0.0, posinf=1.0, neginf=-1.0)
        return np.clip(np.rint(values * 32768.0), -32768, 32767).astype(np.int16).reshape(-1, channels)
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
    mixed: npt.NDArray[np.int16] = np.rint(frames.mean(axis=1)).astype(np.int16)
    return mixed


class _Format:
    def __init__(self, tag: int, channels: int, rate: int, width: int) -> None:
        self.tag, self.channels, self.rate, self.width = tag, channels, rate, width


def _parse_fmt(body: bytes) -> _Format:
    if len(body) < 16:
        raise AudioError("its fmt chunk is too short")
    tag, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", body[:16])
    if tag == EXTENSIBLE:
        if len(body) < 40 or body[26:40] != _GUID_TAIL:
            raise AudioError("a WAVE_FORMAT_EXTENSIBLE header with an unknown sub-format")
        tag = struct.unpack("<H", body[24:26])[0]
    if tag not in _KIND:
        raise AudioError(f"neither integer PCM, float, µ-law nor A-law (format tag {tag:#06x}); convert it to "
                         "16-bit PCM")
    width = (bits + 7) // 8
    if width not in {PCM: (1, 2, 3, 4), IEEE_FLOAT: (4, 8)}.get(tag, (1,)):
        raise AudioError(f"unsupported {bits}-bit {_KIND[tag]} samples")
    if channels < 1 or channels > MAX_CHANNELS:
        raise AudioError(f"its header says {channels} channels (1 to {MAX_CHANNELS} are read)")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(f"its header says {rate} Hz, not an audio sample rate ({MIN_RATE} to {MAX_RATE} Hz are read)")
    return _Format(tag, channels, rate, width)


def _not_a_file(mode: int) -> str | None:
    """What a path that is neither a regular file nor a directory (whose open says so) is: None for those."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


class WavReader:
    """An open WAV file read in blocks of int16 mono samples at the file's own rate: the average of its
    channels, or the one :attr:`channel` names."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        with contextlib.suppress(OSError, ValueError):  # a path that cannot be looked at is said by the open
            # opened, a pipe waits for a writer and a terminal (/dev/tty, /dev/stdin) for a key, for ever if none comes
            what = _not_a_file(os.stat(self.path).st_mode)
            if what is not None:
                raise AudioError(f"cannot read {self.path}: it is {what}; a recording is read from a file")
        try:
            self._file = open(self.path, "rb")
        except OSError as error:
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        try:
            fmt, self._data_start, data_size = self._chunks()
        except AudioError as error:
            self._file.close()
            raise AudioError(f"cannot read {self.path}: {error}") from None
        except OSError as error:
            self._file.close()
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        self.rate: int = fmt.rate
        self.channels: int = fmt.channels
        self.sample_width: int = fmt.width
        self.tag = fmt.tag  # PCM, IEEE_FLOAT, MULAW or ALAW (an extensible header's sub-format)
        self.is_float = fmt.tag == IEEE_FLOAT
        self.frames: int = data_size // (fmt.width * fmt.channels)
        self._left = self.frames
        #: what reading converts to 16-bit samples, e.g. "24-bit integer samples"; None for 8/16-bit PCM
        self.conversion: str | None = (f"{fmt.width * 8}-bit {_KIND[fmt.tag]} samples"
                                       if fmt.tag != PCM or fmt.width > 2 else None)
        #: the channel :meth:`read` yields (0 is the first); None: the average of all of them
        self.channel: int | None = None

    def _chunks(self) -> tuple[_Format, int, int]:
        """The fmt chunk, where the samples start, and how many bytes of them there are."""
        head = self._file.read(12)
        if len(head) < 12 and not b"RIFF".startswith(head[:4]):  # a few bytes of something else: not a start cut short
            raise AudioError("not a WAV file (no RIFF/WAVE header); convert it to 16-bit PCM WAV")
        if len(head) < 12:
            raise AudioError("the file is empty or truncated")
        if head[:4] == b"RIFX" and head[8:12] == b"WAVE":
            raise AudioError("a big-endian (RIFX) WAV file, which is not read; convert it to 16-bit PCM WAV")
        if head[:4] not in (b"RIFF", *_WIDE) or head[8:12] != b"WAVE":
            raise AudioError("not a WAV file (no RIFF/WAVE header); convert it to 16-bit PCM WAV")
        fmt: _Format | None = None
        wide_size: int | None = None  # an RF64 file's data size, from its ds64 chunk
        while True:
            header = self._file.read(8)
            if len(header) < 8:
                raise AudioError("no data chunk (the file is truncated)" if fmt else "no fmt chunk")
            name, size = header[:4], struct.unpack("<I", header[4:])[0]
            if name == b"fmt ":
                if size > MAX_FMT_BYTES:
                    raise AudioError(f"its fmt chunk claims {size} bytes (a WAV header needs at most 40)")
                fmt = _parse_fmt(self._file.read(size))
                self._file.seek(size % 2, os.SEEK_CUR)
            elif name == b"ds64" and head[:4] in _WIDE:
                body = self._file.read(min(size, MAX_FMT_BYTES))
                if len(body) < 16:
                    raise AudioError("its ds64 chunk is too short")
                wide_size = struct.unpack("<Q", body[8:16])[0]
                self._file.seek(size + size % 2 - len(body), os.SEEK_CUR)
            elif name == b"data":
                if fmt is None:
                    raise AudioError("the data chunk comes before the fmt chunk")
                start = self._file.tell()
                available = max(os.fstat(self._file.fileno()).st_size - start, 0)
                if size == UNKNOWN_SIZE and wide_size is not None and 0 < wide_size < 2**64 - 1:  # 0, -1: unfinished
                    size = wide_size  # RF64: the 64-bit size in ds64 stands for the 32-bit one
                elif size == UNKNOWN_SIZE:
                    return fmt, start, available  # a header left unfinished counts what is there
                if size > available:
                    per_s = fmt.rate * fmt.width * fmt.channels
                    raise AudioError(f"the file is cut short: its header says {size / per_s:.2f} s of audio, "
                                     f"the file holds {available / per_s:.2f} s")
                return fmt, start, size
            else:
                self._file.seek(size + size % 2, os.SEEK_CUR)

    @property
    def duration(self) -> float:
        return self.frames / self.rate

    def read(self, frames: int) -> Samples:
        """Up to ``frames`` mono samples; an empty array at the end of the file."""
        frames = max(0, min(frames, self._left))
        frame_bytes = self.sample_width * self.channels
        try:
            raw = self._file.read(frames * frame_bytes)
        except OSError as error:
            raise AudioError(f"cannot read {self.path}: {_reason(error)}") from error
        usable = len(raw) - len(raw) % frame_bytes
        self._left -= usable // frame_bytes
        columns = _frames_to_int16(raw[:usable], self.sample_width, self.channels, self.tag)
        return columns[:, self.channel] if self.channel is not None else _downmix(columns)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


MAX_WAV_BYTES = 0xFFFF_FFFF + 8
"""The largest a WAV file may be: its RIFF size, 32 bits, counts all but its first 8 bytes."""


class WavWriter:
    """A 16-bit mono WAV file written incrementally. The header is written at once and counts what
    each :meth:`write` put on disk (the file stays valid if the process dies); close completes it.

    A write that fails part way (a full disk, a file-size limit) may have put some of its samples
    on disk: closing then cuts the file back to the samples the header counts (every write
    before), so the file holds what its header says, and its last write is not half there.
    """

    def __init__(self, path: PathLike, rate: int = SAMPLE_RATE) -> None:
        self.path = os.fspath(path)
        self.rate = whole(rate, "rate", low=MIN_RATE, high=MAX_RATE)  # what a reader takes (and a header holds)
        self.frames_written = 0
        self._failed: str | None = None  # why a write failed: the file may hold part of it past what the header counts
        self._data_start = 0  # where the samples begin, past the header
        try:
            self._file = open(self.path, "wb")
        except OSError as error:
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error
        try:
            self._wave = wave.open(self._file, "wb")
            self._wave.setnchannels(1)
            self._wave.setsampwidth(2)
            self._wave.setframerate(rate)
            self._wave.writeframes(b"")  # the header now: a valid, empty WAV even if nothing more comes
            self._file.flush()
            self._data_start = self._file.tell()
        except (wave.Error, OSError) as error:
            self._abandon()  # a full disk fails the header's flush, and again every flush on closing
            raise AudioError(f"cannot write {self.path}: {_reason(error)}") from error

    def write(self, samples: Samples) -> None:
        array = np.asarray(samples)
        if array.dtype != np.int16 or array.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {array.dtype} with shape {array.shape}")
        if self._failed is not None:  # a later write would leave a gap where the failed one's samples belong
            raise AudioError(self._failed)
        if self._data_start + 2 * (self.frames_written + len(array)) > MAX_WAV_BYTES:  # 32-bit sizes: a full file
            self._failed = (f"cannot write {self.path}: it holds the {MAX_WAV_BYTES // 2 / self.rate / 3600:.1f} hours "
                            "a WAV file can (4 GiB)")
            raise AudioError(self._failed)
        try:
            self._wave.writeframes(array.astype("<i2", copy=False).tobytes())
        except OSError as error:
            self._failed = f"cannot write {self.path}: {_reason(error)}"
            raise AudioError(self._failed) from error
        self.frames_written += len(array)

    def close(self) -> None:
        """Complete the header and close the file (closed even when that fails: a full disk); idempotent.

        After a failed write (already reported) the file is cut back to what the header counts, and
        nothing more is said."""
        if self._file.closed:
            return
        if self._failed is not None:
            self._abandon()
            self._cut_back()
            return
        failure: OSError | None = None
        for step in (self._wave.close, self._file.close):
            try:
                step()
            except OSError as error:
                failure = failure or error
        if failure is not None:
            raise AudioError(f"cannot write {self.path}: {_reason(failure)}") from failure

    def _cut_back(self) -> None:
        """The file (closed, its buffer dropped or flushed) cut to the header and the samples of every write that
        succeeded, and the header made to count them. Cutting frees space, so this holds on a full disk."""
        size = self._data_start + 2 * self.frames_written
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, size)
                os.pwrite(fd, struct.pack("<I", size - 8), 4)  # RIFF: all that follows its size field
                os.pwrite(fd, struct.pack("<I", size - self._data_start), self._data_start - 4)  # data
            finally:
                os.close(fd)

    def _abandon(self) -> None:
        """Close the file, and the wave writer on it, after a failure already being reported: the same
        failure again on the way (the buffered header flushed once more) says nothing new."""
        steps = [self._wave.close] if getattr(self, "_wave", None) is not None else []
        for step in (*steps, self._file.close):
            with contextlib.suppress(OSError, ValueError):
                step()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        # dropped unclosed (an error before its owner could close it): the header is completed here,
        # before the file object goes, or the wave module's own finalizer flushes a closed file
        if getattr(self, "_wave", None) is not None:
            try:
                self.close()
            except Exception:  # nothing can be reported from a finalizer; the file holds what was written
                pass


def read_wav(path: PathLike) -> tuple[Samples, int]:
    """The whole file as int16 mono samples, and its sample rate."""
    with WavReader(path) as reader:
        return reader.read(reader.frames), reader.rate


def write_wav(path: PathLike, samples: Samples, rate: int = SAMPLE_RATE) -> None:
    """Write int16 mono samples as a 16-bit PCM WAV file."""
    with WavWriter(path, rate) as writer:
        writer.write(samples)
