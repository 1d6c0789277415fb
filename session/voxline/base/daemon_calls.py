"""A blocking call that may never return (a sound device's driver), made off the event loop on a thread of its own.

``asyncio.to_thread`` runs work on the loop's default executor, whose threads the loop's closing
and the interpreter's exit both wait for: a PortAudio call stuck in a driver (a device unplugged
mid-start) then holds a session, its ``asyncio.run`` and the process for ever. :func:`off_loop`
runs the call on a daemon thread of its own and waits for it at most ``timeout_s``: on time, its
result or its exception; late, :class:`CallStuck` (the thread is left to finish, or not, and
keeps no exit waiting), which holds the call still running (:attr:`CallStuck.job`) for whoever
wants its late end. A cancelled wait leaves the thread likewise.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CallStuck", "off_loop"]

T = TypeVar("T")


class CallStuck(TimeoutError):
    """A call made by :func:`off_loop` did not return within its time; it may never.

    :attr:`job` is the call, still running: a future of the loop that ends with its result or its exception if it
    ever returns (a done callback takes it, or closes what it made)."""

    def __init__(self, message: str, job: asyncio.Future[Any] | None = None) -> None:
        super().__init__(message)
        self.job = job


class _DaemonThreads(concurrent.futures.Executor):
    """An executor whose every job runs on a daemon thread of its own: nothing joins them (not the loop's close, not
    the interpreter's exit). Handed to ``run_in_executor``, so a loop that counts its thread jobs (the lockstep
    loop, which holds its virtual clock meanwhile) counts these too."""

    def __init__(self, name: str) -> None:
        self._name = name

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the waiter, whatever it is
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name=self._name, daemon=True).start()
        return future


async def off_loop(call: Callable[..., T], *args: Any, timeout_s: float, name: str) -> T:
    """``call(*args)`` on a daemon thread named ``name``; its result, or what it raised, within ``timeout_s``
    seconds of real time (whatever the loop's clock), else :class:`CallStuck`."""
    loop = asyncio.get_running_loop()
    job = loop.run_in_executor(_DaemonThreads(name), call, *args)
    job.add_done_callback(_retrieved)  # an end nobody waits for any more (stuck, or the waiter cancelled) is no error
    late: asyncio.Future[None] = loop.create_future()

    def expire() -> None:
        if not late.done():
            late.set_result(None)

    def from_timer() -> None:
        try:
            loop.call_soon_threadsafe(expire)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    timer = threading.Timer(timeout_s, from_timer)
    timer.daemon = True
    timer.start()
    try:
        await asyncio.wait((job, late), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        late.cancel()
    if job.done():
        return job.result()
    raise CallStuck(f"{name} did not return within {timeout_s:g} s", job)


def _retrieved(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()
