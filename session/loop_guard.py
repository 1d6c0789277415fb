"""A session's loops run in a task group entered by the application's task: a loop that raised
would cancel that task and surface as an ``ExceptionGroup``. :func:`guarded` keeps every loop's
failure inside the session instead, reported as one :class:`~voxline.session.events.SessionError`.

An input that raises (a microphone iterator that broke, a block that is no audio) ends the input
and the session goes on without it; any other loop that raises (the output, the receive loop)
ends what the session can do, so its error is fatal and the application closes the session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from voxline.base.contain import contain
from voxline.base.errors import message_of

from .events import SessionError

__all__ = ["guarded"]

_log = logging.getLogger("voxline.session")


async def guarded(loop: Callable[[], Awaitable[None]], what: str, report: Callable[[SessionError], None], *,
                  fatal: bool = True) -> None:
    """Run ``loop()``; what it raises (Ctrl-C and the session's own cancel aside) is reported, not raised.

    ``loop`` is made here, not handed in made: a task cancelled before its first step would
    leave a coroutine made outside it never awaited."""
    try:
        await loop()
    except BaseException as exc:
        contain(exc)
        # the event says it; the traceback is for whoever debugs (a command's output stays one line)
        _log.debug("%s failed: %s: %s", what, type(exc).__name__, message_of(exc), exc_info=exc)
        code = what.replace(" ", "_") + "_failed"
        report(SessionError(f"the {what} failed: {type(exc).__name__}: {message_of(exc)}", code, fatal=fatal))
