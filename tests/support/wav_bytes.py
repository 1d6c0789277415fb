"""WAV files written byte by byte: any header a test needs, including headers that lie."""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["write_chunked_wav", "write_rf64"]


def write_chunked_wav(path: Path, data: bytes, rate: int, channels: int, bits: int, tag: int,
                      extensible: bool = False, extra_chunk: bool = False, data_size: int | None = None) -> Path:
    """A WAV file, optionally with a WAVE_FORMAT_EXTENSIBLE header (as sox writes) and a data chunk whose
    header claims ``data_size`` bytes whatever ``data`` holds."""
    align = channels * bits // 8
    head = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, (rate * align) & 0xFFFFFFFF, align & 0xFFFF, bits)
    if extensible:
        guid = struct.pack("<H", tag) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        head += struct.pack("<HHI", 22, bits, 0) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(head)) + head
    if extra_chunk:
        body += b"LIST" + struct.pack("<I", 5) + b"abcde\x00"  # odd size: padded to even
    body += b"data" + struct.pack("<I", len(data) if data_size is None else data_size) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body) & 0xFFFFFFFF) + body)
    return path


def write_rf64(path: Path, data: bytes, rate: int, data_size: int | None = None, trailer: bytes = b"") -> Path:
    """A 16-bit mono RF64 file (a WAV over 4 GiB, EBU 3306): its 32-bit sizes left at 0xFFFFFFFF, the real ones in a
    ds64 chunk, which claims ``data_size`` bytes of samples whatever ``data`` holds; ``trailer`` (chunks) follows them."""
    size = len(data) if data_size is None else data_size
    ds64 = struct.pack("<QQQI", 4 + 36 + 24 + 8 + len(data) + len(trailer), size, size // 2, 0)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = (b"WAVE" + b"ds64" + struct.pack("<I", len(ds64)) + ds64 + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"data" + struct.pack("<I", 0xFFFFFFFF) + data + trailer)
    path.write_bytes(b"RF64" + struct.pack("<I", 0xFFFFFFFF) + body)
    return path
