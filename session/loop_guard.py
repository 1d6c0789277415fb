"""A session's loops run in a task group entered by the application's task: a loop that raised
would cancel that task and surface as an ``ExceptionGroup``. :func:`guarded` keeps every loop's
failure inside the session instead, reported as one :class:`~voxline.session.events.SessionError`.

An input that raises (a microphone iterator that broke, a block that is no audio) ends the input
and the session goes on without it; any other loop that raises (the output, the receive loop)
ends what the session can do, so its error is fatal and the application closes the session.

The input runs the application's own iterator, which may swallow its cancel (a bare ``except``
around a device read): :func:`let_go_if_stuck` runs it in a task of its own, so closing the
session waits for it at most :data:`LET_GO_S`, then goes on without it, as it does for a tool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from voxline.base.clock import Clock, wait_within
from voxline.base.contain import contain, outcome, run_apart
from voxline.base.errors import message_of
from voxline.base.loop_runner import hold

from .events import SessionError

__all__ = ["LET_GO_S", "guarded", "let_go_if_stuck"]

_log = logging.getLogger("voxline.session")

LET_GO_S = 0.5  # on the loop's clock: how long a close waits for an input that ignores its cancel


async def let_go_if_stuck(loop: Callable[[], Awaitable[None]], what: str, clock: Clock) -> None:
    """Run ``loop()`` in a task of its own; cancelled, cancel it too and wait for it at most :data:`LET_GO_S`
    of ``clock``'s time."""
    work = run_apart(loop(), name=f"voxline {what}")
    try:
        await asyncio.wait((work,))
    except asyncio.CancelledError:
        work.cancel()
        if not await wait_within(clock, LET_GO_S, work):
            _log.warning("the %s ignored its cancel; the session closes without waiting for it", what)
            hold(work)
        raise
    outcome(await work)  # done: what it raised, raised here (where the session contains it)


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
