"""Strict base64 decoding of audio payloads (``response.output_audio.delta``).

Uses ``pybase64`` (SIMD, about 15x faster on a 100 ms delta) when it is installed, and
the standard library's ``binascii`` otherwise. Both reject any character outside the
base64 alphabet; what ``pybase64`` rejects is retried with the standard library, so the
accepted inputs and their bytes are exactly those of ``b64decode(validate=True)``.
"""

from __future__ import annotations

import binascii
import functools
from collections.abc import Callable

from ..errors import RemoteProtocolError

__all__ = ["BASE64_BACKEND", "decode_audio", "decode_audio_stdlib", "decode_strict"]


def decode_audio_stdlib(text: str) -> bytes:
    """Strict decode with the standard library (``validate=True`` semantics)."""
    return binascii.a2b_base64(text, strict_mode=True)


def _select() -> tuple[str, Callable[[str], bytes]]:
    try:
        import pybase64
    except ImportError:
        return "binascii", decode_audio_stdlib

    return "pybase64", functools.partial(pybase64.b64decode, validate=True)


BASE64_BACKEND, _decode = _select()
"""Which decoder :func:`decode_audio` uses: ``"pybase64"`` or ``"binascii"``."""


def decode_strict(text: str) -> bytes:
    """Decode base64 strictly (``b64decode(validate=True)``'s inputs and bytes); ``ValueError`` if invalid."""
    try:
        return _decode(text)
    except ValueError:  # binascii.Error is a ValueError; so is a non-ASCII str
        pass
    return decode_audio_stdlib(text)  # the fast decoder is stricter on odd padding: the standard library has the last word


def decode_audio(text: str) -> bytes:
    """Decode base64 audio strictly; :class:`RemoteProtocolError` (one line, no payload) if invalid."""
    try:
        return decode_strict(text)
    except ValueError as exc:
        reason = str(exc).split("\n", 1)[0]
        raise RemoteProtocolError(f"audio delta is not valid base64 ({len(text)} chars): {reason}") from None
