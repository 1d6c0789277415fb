"""An event loop run from synchronous code, closed without waiting for ever on what ignores its cancel.

``asyncio.Runner`` closes by cancelling every task still running and waiting until each has
ended. A task that swallows its cancel (a tool awaiting in a ``while True`` that catches
``CancelledError``; the session already answered its call and let it go) would keep the
command (or a farm's worker) from exiting after it wrote everything. :func:`bounded_runner` waits for such tasks
at most :data:`CLOSE_S`, then says which it left and closes the loop without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator

__all__ = ["CLOSE_S", "bounded_runner"]

CLOSE_S = 2.0  # on the loop's clock: a lockstep loop's virtual time, where it is one


@contextlib.contextmanager
def bounded_runner(factory: Callable[[], asyncio.AbstractEventLoop] | None) -> Iterator[asyncio.Runner]:
    """An ``asyncio.Runner`` (on ``factory``'s loop) whose closing waits at most :data:`CLOSE_S` for tasks left running."""
    runner = asyncio.Runner(loop_factory=factory)
    try:
        yield runner
    finally:
        _close(runner)


def _close(runner: asyncio.Runner) -> None:
    loop = runner.get_loop()
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.wait(left, timeout=CLOSE_S))
        left = [task for task in left if not task.done()]
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
