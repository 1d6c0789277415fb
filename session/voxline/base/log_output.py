"""Log records of ``voxline.*`` to stderr, one line each, with anything shaped like a key masked.

The command line sets it up for its level flags; a server's worker process sets it up again at
the level its command resolved (``voxline serve --workers``).
"""

from __future__ import annotations

import logging
import sys

from .errors import printable, redact

__all__ = ["log_to_stderr"]


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


class _StderrHandler(logging.StreamHandler):
    """Writes each record to ``sys.stderr`` as it is when the record comes, not as it was when logging was set up:
    a live display (``talk``'s panel) puts its own there meanwhile, and prints the line above itself instead of
    being torn by it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass  # always sys.stderr


def log_to_stderr(level: str) -> None:
    """``voxline.*`` records at ``level`` (``"info"``, ``"DEBUG"``…) and above to stderr, and nowhere else."""
    handler = _StderrHandler()
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("voxline")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
