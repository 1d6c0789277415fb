"""Lines for people on a stream whose reader may go away (``voxline … | head -1``, ``2>&1 | true``)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO

__all__ = ["QuietWhenGone"]


class QuietWhenGone:
    """stderr, or a replay's stdout, that drops its lines once its reader went away (``2>&1 | true``, ``| head
    -1``): they are for people, and the run goes on to write its files; before, the first line ended it (on
    stdout, a farm's verdict line: a traceback, and no JUnit file). The descriptor is then the null device, and
    :attr:`gone` says so, for the command to end with status 1 once its files are written."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        self.gone = True
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
