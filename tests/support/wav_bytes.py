"""WAV files written byte by byte: any header a test needs, including headers that lie."""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["write_chunked_wav"]


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
