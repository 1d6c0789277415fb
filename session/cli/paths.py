"""Output paths on the command line: ``-`` is stdout.

``-`` becomes :data:`STDOUT` (the path ``/dev/stdout``, one object, so that a file a user names ``./-`` stays a file
of that name); the files written whole go there through the process's own descriptor
(:func:`voxline.base.files.replaced`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["STDOUT", "output_path"]

STDOUT = Path("/dev/stdout")


def output_path(text: str) -> Path:
    """An output flag's value: ``-`` is :data:`STDOUT`, anything else the path it names."""
    return STDOUT if text == "-" else Path(text)
