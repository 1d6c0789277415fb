"""Files written whole: a reader finds the old file or the new one, never half of either.

:func:`replaced` writes through a temporary file beside the target and renames it over the
target once everything is written; a failure (a full disk, an exception of the writer) removes
the temporary file and leaves the target as it was. A target that exists and is no regular
file (``/dev/stdout``, a named pipe, a terminal) is written in place instead: renaming over it
would replace a device with a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["replaced"]


@contextlib.contextmanager
def replaced(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content to; it becomes ``path`` when the block ends normally."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a directory", str(target))
    if target.exists() and not target.is_file():  # a device or a pipe: written in place, never replaced
        with open(target, "wb") as stream:
            yield stream
        return
    temporary = target.with_name(target.name + ".tmp")
    try:
        with open(temporary, "wb") as file:
            yield file
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
