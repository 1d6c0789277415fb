"""The root of voxline's one exception tree, and the error of the media pipeline.

::

    VoxlineError                    every error voxline raises on purpose; str() is one line
    ├── AudioError                  a format spelled wrongly, an unreadable or non-PCM WAV file,
    │                               a missing or busy sound device
    └── RealtimeError               the wire and the session (voxline.realtime.errors draws it)

Messages never contain keys or tokens: :class:`VoxlineError` redacts anything that looks
like one (:func:`redact`).
"""

from __future__ import annotations

import re

__all__ = ["AudioError", "VoxlineError", "redact"]

_SECRET = re.compile(r"\b(sk-[A-Za-z0-9_\-]{4,}|ek_[A-Za-z0-9_\-]{4,}|Bearer\s+\S+)")


def redact(text: str) -> str:
    """Replace anything that looks like an API key, ephemeral key or bearer token."""
    return _SECRET.sub("[redacted]", text)


class VoxlineError(Exception):
    """Base of every error voxline raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class AudioError(VoxlineError):
    """A user-facing audio problem: devices and audio files."""
