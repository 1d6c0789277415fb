"""The root of voxline's one exception tree, and the error of the media pipeline.

::

    VoxlineError                    every error voxline raises on purpose; str() is one line
    ├── AudioError                  a format spelled wrongly, an unreadable or non-PCM WAV file,
    │                               a missing or busy sound device
    ├── OutputError                 a file written as a run goes (an event log) that cannot be written
    └── RealtimeError               the wire and the session (voxline.realtime.errors draws it)

Messages never contain keys or tokens: :class:`VoxlineError` passes every message through
:func:`~voxline.base.redaction.redact`, which removes anything that looks like one and every key
registered in use.
"""

from __future__ import annotations

from .redaction import redact

__all__ = ["AudioError", "OutputError", "VoxlineError", "message_of"]


def message_of(exc: BaseException, fallback: str = "(its message could not be read)") -> str:
    """``str(exc)``, or ``fallback`` when the exception's own ``__str__`` (user code) raises anything."""
    try:
        return str(exc)
    except BaseException:
        return fallback


class VoxlineError(Exception):
    """Base of every error voxline raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class AudioError(VoxlineError):
    """A user-facing audio problem: devices and audio files."""


class OutputError(VoxlineError):
    """A file written as a run goes (an event log) cannot be written: a full disk, a lost mount."""
