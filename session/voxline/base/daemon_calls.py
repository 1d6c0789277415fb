"""A blocking call that may never return (a sound device's driver), made off the event loop on a thread of its own.

``asyncio.to_thread`` runs work on the loop's default executor, whose threads the loop's closing
and the interpreter's exit both wait for: a PortAudio call stuck in a driver (a device unplugged
mid-start) then holds a session, its ``asyncio.run`` and the process for ever. :func:`off_loop`
runs the call on a daemon thread of its own and waits for it at most ``timeout_s``: on time, its
result or its exception; late, :class:`CallStuck` (the thread is left to finish, or not, and
keeps no exit waiting). A cancelled wait leaves the thread likewise.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CallStuck", "off_loop"]

T = TypeVar("T")


class CallStuck(TimeoutError):
    """A call made by :func:`off_loop` did not return within its time; it may never."""


async def off_loop(call: Callable[..., T], *args: Any, timeout_s: float, name: str) -> T:
    """``call(*args)`` on a daemon thread named ``name``; its result, or what it raised, within ``timeout_s``
    seconds of real time (whatever the loop's clock), else :class:`CallStuck`."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return  # the waiter gave up (stuck, or cancelled)
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def from_thread(result: T | None, error: BaseException | None) -> None:
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def run() -> None:
        try:
            result = call(*args)
        except BaseException as exc:  # handed to the waiter, whatever it is
            from_thread(None, exc)
        else:
            from_thread(result, None)

    timer = threading.Timer(timeout_s, from_thread,
                            (None, CallStuck(f"{name} did not return within {timeout_s:g} s")))
    timer.daemon = True
    threading.Thread(target=run, name=name, daemon=True).start()
    timer.start()
    try:
        return await done
    finally:
        timer.cancel()
