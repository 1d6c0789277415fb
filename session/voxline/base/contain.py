"""Where an application's exception stops: tools, callbacks, connectors, backoffs.

Whatever the application's code raises is handled where it was caught (an error output, one
failed try, a reported event), with two exceptions that must go on: Ctrl-C, and the
cancellation of the task that ran the code (closing, a timeout). This module is apart from
:mod:`voxline.base.errors` because it asks the event loop, which the sans-I/O layers never do.
"""

from __future__ import annotations

import asyncio

from .loop_runner import loop_running

__all__ = ["contain"]


def contain(exc: BaseException) -> None:
    """Return if ``exc``, raised by an application's code (a tool, a callback, a connector) in the
    current task, is to be handled where it was caught; raise what must go on instead.

    Ctrl-C goes on as it is. When the task itself is being cancelled (closing, a timeout), the
    cancellation goes on, whatever the application's code raised while it was stopped.
    """
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    task = asyncio.current_task() if loop_running() else None
    if task is not None and task.cancelling():
        if isinstance(exc, asyncio.CancelledError):
            raise exc
        raise asyncio.CancelledError() from exc
