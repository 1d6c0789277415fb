"""Text files a command reads whole before it starts: a farm's manifest, a scenario, a sidecar transcript.

:func:`read_document` reads at most :data:`MAX_DOCUMENT_BYTES`, so memory is bounded whatever the path
is (``/dev/zero`` read whole never ends, a file of gigabytes is no manifest), and refuses a device
(a terminal would wait for a key for ever). A pipe is read, as ``--manifest <(make-farm)`` needs.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_DOCUMENT_BYTES", "read_document"]

MAX_DOCUMENT_BYTES = 64 << 20
"""Far past any manifest, scenario or transcript written by hand or by a script (a farm of a hundred thousand
recordings is some ten MiB of manifest)."""


def read_document(path: str | os.PathLike[str]) -> str:
    """The file's text, as UTF-8 (a byte-order mark, as Notepad writes, dropped).

    Raises :class:`OSError` whose ``strerror`` says why (it is a device, it is too large, or what opening it
    said), or :class:`UnicodeDecodeError` for text that is not UTF-8."""
    with open(path, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise OSError(errno.EINVAL, "it is a device, not a file")
        data = file.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise OSError(errno.EFBIG, f"it holds more than {MAX_DOCUMENT_BYTES >> 20} MiB, more than any such file")
    return data.decode("utf-8-sig")
