"""Audio arithmetic on wire events: milliseconds in a ``response.output_audio.delta``.

PCM16 at 24 kHz is 48 bytes per millisecond, G.711 (``audio/pcmu``, ``audio/pcma``) 8
(docs/protocol.md §6). The delta is measured from its base64 length, without decoding it.
"""

from __future__ import annotations

from typing import Any

from voxline.realtime.frames import b64_len as b64_decoded_length
from voxline.realtime.frames import table as _table

__all__ = ["PCM_BYTES_PER_MS", "b64_decoded_length", "output_bytes_per_ms"]

PCM_BYTES_PER_MS = 48.0
_G711 = frozenset({"audio/pcmu", "audio/pcma"})


def output_bytes_per_ms(audio: dict[str, Any] | None) -> float | None:
    """Bytes per ms of a session's ``audio.output.format``; ``None`` when it names no format."""
    output = _table(_table(audio).get("output"))
    kind = _table(output.get("format")).get("type")
    if not isinstance(kind, str):
        return None
    return 8.0 if kind in _G711 else PCM_BYTES_PER_MS

