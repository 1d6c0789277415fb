"""Audio arithmetic on wire events: milliseconds in a ``response.output_audio.delta``.

PCM16 at 24 kHz is 48 bytes per millisecond, G.711 (``audio/pcmu``, ``audio/pcma``) 8
(docs/protocol.md §6). The delta is measured from its base64 length, without decoding it.
"""

from __future__ import annotations

from voxline.realtime.frames import b64_len as b64_decoded_length

__all__ = ["PCM_BYTES_PER_MS", "b64_decoded_length"]

PCM_BYTES_PER_MS = 48.0
