"""The error raised by the media pipeline.

``audio`` imports nothing else of voxline, so it carries its own small base class.
The session layer translates it into ``realtime.errors.AudioError`` where the two meet.

::

    AudioError      a format spelled wrongly, an unreadable or non-PCM WAV file,
                    a WAV file that cannot be written
"""

from __future__ import annotations

__all__ = ["AudioError"]


class AudioError(Exception):
    """A user-facing audio problem; ``str(error)`` is one clear line."""
