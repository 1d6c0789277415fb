"""Where an application's exception stops: tools, callbacks, connectors, backoffs.

Whatever the application's code raises is handled where it was caught (an error output, one
failed try, a reported event), with two exceptions that must go on: Ctrl-C, and the
cancellation of the task that ran the code (closing, a timeout). This module is apart from
:mod:`voxline.base.errors` because it asks the event loop, which the sans-I/O layers never do.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import NamedTuple, TypeVar

from .loop_runner import loop_running

__all__ = ["Raised", "being_cancelled", "contain", "kept_apart", "outcome", "run_apart"]

T = TypeVar("T")


def contain(exc: BaseException) -> None:
    """Return if ``exc``, raised by an application's code (a tool, a callback, a connector) in the
    current task, is to be handled where it was caught; raise what must go on instead.

    Ctrl-C goes on as it is. When the task itself is being cancelled (closing, a timeout), the
    cancellation goes on, whatever the application's code raised while it was stopped.
    """
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    if being_cancelled():
        if isinstance(exc, asyncio.CancelledError):
            raise exc
        raise asyncio.CancelledError() from exc


def being_cancelled() -> bool:
    """The running task is being cancelled (by whoever awaits it: not a cancel of something it awaited, which ends as
    a CancelledError in it all the same)."""
    task = asyncio.current_task() if loop_running() else None
    return task is not None and task.cancelling() > 0


class Raised(NamedTuple):
    """What an application's code raised in a task of its own (:func:`kept_apart`), handed back as a value."""

    exc: BaseException


async def kept_apart(work: Awaitable[T]) -> T | Raised:
    """``await work``, for a task of its own that runs an application's code (an input, a connector): what the code
    raises comes back as :class:`Raised` instead of ending the task, because a task that ends in ``SystemExit`` or
    ``KeyboardInterrupt`` stops the event loop. Whoever awaits the task raises it there (:func:`outcome`), where it is
    contained. A cancel goes on as a cancel."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the application's, whatever it is: handed back
        return Raised(exc)


def run_apart(work: Awaitable[T], *, name: str | None = None) -> asyncio.Task[T | Raised]:
    """A task of its own awaiting ``work`` kept apart (:func:`kept_apart`). A task cancelled before it first ran
    never awaited ``work``: a coroutine is then closed, so Python prints no 'was never awaited' warning for it."""
    task = asyncio.get_running_loop().create_task(kept_apart(work), name=name)
    if inspect.iscoroutine(work):  # done, the task has finished with it, or never began it
        task.add_done_callback(lambda _task: work.close())
    return task


def outcome(result: T | Raised) -> T:
    """The value a :func:`kept_apart` task gave, or what its code raised, raised here."""
    if isinstance(result, Raised):
        raise result.exc
    return result
