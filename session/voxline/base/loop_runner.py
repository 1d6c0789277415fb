"""An event loop run from synchronous code, closed without waiting for ever on what ignores its cancel.

``asyncio.Runner`` closes by cancelling every task still running and waiting until each has
ended. A task that swallows its cancel (a tool awaiting in a ``while True`` that catches
``CancelledError``; the session already answered its call and let it go) would keep the
command (or a farm's worker) from exiting after it wrote everything. :func:`bounded_runner` waits for such tasks
at most :data:`CLOSE_S`, then says which it left and closes the loop without them.

A command runs in real time on asyncio's own loop, or on uvloop (asyncio's API on libuv) with
:envvar:`VOXLINE_EVENT_LOOP` ``=uvloop`` and the ``uvloop`` extra installed: at a few hundred
sessions in a process, its loop lag is lower and its CPU the same. A loop a command
asks for itself (``replay --fast``'s lockstep loop) is taken as it is. A program that embeds
sessions runs them on whatever loop it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from voxline.base.errors import VoxlineError

__all__ = ["CLOSE_S", "EVENT_LOOP_ENV", "bounded_runner", "hold", "loop_name", "loop_running", "real_time_loop"]

log = logging.getLogger("voxline.loop")

EVENT_LOOP_ENV = "VOXLINE_EVENT_LOOP"
_LOOP_CHOICES = ("asyncio", "uvloop")

_HELD: set[asyncio.Task[Any]] = set()


def hold(task: asyncio.Task[Any]) -> None:
    """Keep a task nobody awaits (a tool or an input let go of, a close begun from inside a session) until it ends.

    The loop keeps only weak references to its tasks: one that waits on something only it holds would
    otherwise be collected mid-wait (asyncio then logs 'Task was destroyed but it is pending'), and a
    command's closing (:func:`bounded_runner`) could not name it.
    """
    if not task.done():
        _HELD.add(task)
        task.add_done_callback(_HELD.discard)

CLOSE_S = 2.0  # of real time, whatever the loop's clock


def loop_running() -> bool:
    """Whether this thread runs an event loop now (asking asyncio raises where none does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def real_time_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop a command runs on in real time, as :envvar:`VOXLINE_EVENT_LOOP` chooses
    (``None``: asyncio's own); raises :class:`~voxline.base.errors.VoxlineError` for a choice it cannot honour."""
    given = os.environ.get(EVENT_LOOP_ENV, "").strip()
    choice = given.lower() or "asyncio"
    if choice not in _LOOP_CHOICES:
        raise VoxlineError(f"{EVENT_LOOP_ENV} is {given[:40]!r}: give one of {', '.join(_LOOP_CHOICES)}")
    if choice == "asyncio":
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        raise VoxlineError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed (pip install 'voxline[uvloop]')"
                           ) from None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio`` by the package of the loop's class, else the class's name (``LockstepLoop``)."""
    package = type(loop).__module__.split(".")[0]
    return package if package in ("uvloop", "asyncio") else type(loop).__name__


@contextlib.contextmanager
def bounded_runner(factory: Callable[[], asyncio.AbstractEventLoop] | None) -> Iterator[asyncio.Runner]:
    """An ``asyncio.Runner`` (on ``factory``'s loop, else :func:`real_time_loop`'s) whose closing waits at most
    :data:`CLOSE_S` for tasks left running. :envvar:`VOXLINE_EVENT_LOOP` is checked either way: a choice it cannot
    honour is an error, not ignored because this command brings its own loop."""
    chosen = real_time_loop()
    runner = asyncio.Runner(loop_factory=factory if factory is not None else chosen)
    try:
        log.debug("event loop: %s", loop_name(runner.get_loop()))
        yield runner
    finally:
        _close(runner)


def _close(runner: asyncio.Runner) -> None:
    loop = runner.get_loop()
    deadline = time.monotonic() + CLOSE_S  # real time: a lockstep loop's clock may stand still meanwhile
    cancelled: set[asyncio.Task[object]] = set()
    while True:
        left = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in left:  # those started meanwhile too (a tool's cleanup that starts another task)
            if task not in cancelled:
                task.cancel()
                cancelled.add(task)
        remaining = deadline - time.monotonic()
        if not left or remaining <= 0:
            break
        _run_until_done(loop, left, remaining)
    if not left:
        runner.close()
        return
    names = sorted({task.get_name() for task in left})
    print(f"voxline: left running, as it ignored its cancel: {', '.join(names)}", file=sys.stderr, flush=True)
    for task in left:
        with contextlib.suppress(AttributeError):
            task._log_destroy_pending = False  # type: ignore[attr-defined]  # said above, once
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()  # runner.close() would wait for them again, for ever


def _run_until_done(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[object]], seconds: float) -> None:
    """Run ``loop`` until every task of ``tasks`` is done, or ``seconds`` of real time have passed."""
    stop: asyncio.Future[None] = loop.create_future()
    pending = set(tasks)

    def end() -> None:
        if not stop.done():
            stop.set_result(None)

    def one_done(task: asyncio.Task[object]) -> None:
        pending.discard(task)
        if not pending:
            end()

    for task in tasks:
        task.add_done_callback(one_done)
    timer = threading.Timer(seconds, loop.call_soon_threadsafe, (end,))
    timer.daemon = True
    timer.start()
    try:
        loop.run_until_complete(stop)
    finally:
        timer.cancel()
        for task in tasks:
            task.remove_done_callback(one_done)
