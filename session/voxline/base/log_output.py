"""Log records of ``voxline.*`` to stderr, one line each, with anything shaped like a key masked.

The command line sets it up for its level flags; a server's worker process sets it up again at
the level its command resolved (``voxline serve --workers``).
"""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import TextIO

from .redaction import redact
from .shown import printable

__all__ = ["SAID_AS_EVENT", "log_to_stderr", "same_place", "skip_records_said_as_events"]

SAID_AS_EVENT = {"said_as_event": True}
"""``extra`` of a record whose news the session also publishes as an event (a reconnect that failed): a command
printing the events where its log goes too (:func:`skip_records_said_as_events`) says it once."""


class _RedactingFormatter(logging.Formatter):
    """A formatter that masks anything shaped like a key or token, whatever a record carries, and
    shows the control characters of its message as escapes (a close reason a server chose may hold
    a line break that would forge a record, or a terminal's escape sequences)."""

    def format(self, record: logging.LogRecord) -> str:
        msg, args = record.msg, record.args
        record.msg, record.args = printable(record.getMessage()), None
        try:
            return redact(super().format(record))
        finally:
            record.msg, record.args = msg, args


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes each record to ``sys.stderr`` as it is when the record comes, not as it was when logging was set up:
    a live display (``talk``'s panel) puts its own there meanwhile, and prints the line above itself instead of
    being torn by it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # always sys.stderr


def log_to_stderr(level: str) -> None:
    """``voxline.*`` records at ``level`` (``"info"``, ``"DEBUG"``…) and above to stderr, and nowhere else."""
    handler = _StderrHandler()
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("voxline")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


class _NotSaidAsEvent(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "said_as_event", False)


def skip_records_said_as_events() -> None:
    """Leave out of stderr the records the session also publishes as events (:data:`SAID_AS_EVENT`): for a command
    that prints every event to where stderr goes."""
    for handler in logging.getLogger("voxline").handlers:
        if not any(isinstance(f, _NotSaidAsEvent) for f in handler.filters):
            handler.addFilter(_NotSaidAsEvent())


def same_place(a: TextIO, b: TextIO) -> bool:
    """True if both streams write to the same file (one terminal): what one prints, the other need not."""
    try:
        first, second = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # a stream with no descriptor (a test's)
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
