"""Worker threads for blocking tools, apart from the event loop's default executor.

A blocking tool must never delay what a session needs threads for (a device abort on a
barge-in runs in the loop's default executor), and a tool stuck past its timeout must not
keep a worker other calls need. :class:`ToolThreads` runs at most ``workers`` jobs at a
time; a job whose caller gave up (:meth:`ToolThreads.abandon`, on a timeout or a cancel)
stops counting at once: its thread finishes the job and then ends, and a new thread takes
its place. At most ``max_abandoned`` such threads may linger; beyond that new jobs wait,
so a tool that hangs forever cannot grow the process without bound. Nor can one tool take all
of those places from the others (every session of a shared registry): once ``max_stuck`` jobs
of one tool (:meth:`ToolThreads.submit_as`) ran past their time and have not returned, its next
calls fail at once with a :class:`~voxline.realtime.errors.ToolError` until one does. A thread with no job for
``idle_s`` ends: a pool nobody uses any more (a registry made per session) leaves no thread behind.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from voxline.base.arguments import as_error, real, text, whole
from voxline.realtime.errors import ToolError

__all__ = ["IDLE_S", "ToolThreads"]

IDLE_S = 30.0
"""How long a worker with no job waits for one before it ends."""

_Job = tuple[concurrent.futures.Future[Any], str | None, Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ToolThreads:
    """A bounded pool of daemon threads; thread-safe, shareable by the sessions of one registry."""

    def __init__(self, workers: int = 8, *, max_abandoned: int = 32, max_stuck: int = 4, name: str = "voxline-tool",
                 idle_s: float = IDLE_S) -> None:
        with as_error(ToolError, "ToolThreads"):
            self.workers = whole(workers, "workers", low=1)
            self.max_abandoned = whole(max_abandoned, "max_abandoned", low=0)
            self.max_stuck = whole(max_stuck, "max_stuck", low=1)
            self.idle_s = real(idle_s, "idle_s", low=0, above=True)
            self._name = text(name, "name")
        self._lock = threading.Lock()
        self._jobs: deque[_Job] = deque()
        self._counted = 0  # threads that count against ``workers``
        self._idle = 0
        self._abandoned = 0  # threads finishing a job nobody waits for
        self._running: dict[concurrent.futures.Future[Any], tuple[threading.Thread, str | None]] = {}
        self._stuck: dict[concurrent.futures.Future[Any], str] = {}  # jobs abandoned past their time, still running
        self._given_up: set[threading.Thread] = set()
        self._wake = threading.Condition(self._lock)
        self._serial = 0

    def stats(self) -> dict[str, int]:
        """Threads working for callers, idle, abandoned, and jobs waiting."""
        with self._lock:
            return {"counted": self._counted, "idle": self._idle, "abandoned": self._abandoned,
                    "queued": sum(not job[0].cancelled() for job in self._jobs)}

    def submit(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Run ``function(*args, **kwargs)`` on a worker; the future holds its result."""
        return self.submit_as(None, function, *args, **kwargs)

    def submit_as(self, tool: str | None, function: Callable[..., Any], /, *args: Any,
                  **kwargs: Any) -> concurrent.futures.Future[Any]:
        """:meth:`submit` for a job of ``tool``: it fails at once while ``max_stuck`` of that tool's jobs were
        abandoned and have not returned."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            stuck = 0 if tool is None else sum(of == tool for of in self._stuck.values())
            if stuck >= self.max_stuck:
                calls = "1 earlier call of it has" if stuck == 1 else f"{stuck} earlier calls of it have"
                future.set_exception(ToolError(f"{tool} is stuck: {calls} not returned, and it is not run again until "
                                               "one does"))
                return future
            self._jobs.append((future, tool, function, args, kwargs))
            if self._idle:
                self._wake.notify()
            # a worker woken still counts as idle until it takes its job: more jobs waiting than idle workers
            # need threads of their own, or a burst after a quiet spell would run one job at a time
            if len(self._jobs) > self._idle and self._counted < self.workers and self._abandoned <= self.max_abandoned:
                self._start()
        return future

    def abandon(self, future: concurrent.futures.Future[Any], *, timed_out: bool = True) -> None:
        """The caller no longer waits for ``future``: free its worker's place (see the module docstring). Only a job
        abandoned because it ran past its time (``timed_out``) counts as its tool's stuck one; one whose caller went
        away (a session closing) does not."""
        with self._lock:
            if future.cancel():  # still queued: it will never run
                return
            running = self._running.get(future)
            if running is None or running[0] in self._given_up:
                return
            thread, tool = running
            self._given_up.add(thread)
            self._counted -= 1
            self._abandoned += 1
            if tool is not None and timed_out:
                self._stuck[future] = tool
            if self._jobs and self._abandoned <= self.max_abandoned:
                self._start()

    def _start(self) -> None:
        self._serial += 1
        self._counted += 1
        threading.Thread(target=self._work, name=f"{self._name}-{self._serial}", daemon=True).start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                while not self._jobs:
                    self._idle += 1
                    woken = self._wake.wait(self.idle_s)
                    self._idle -= 1
                    if not woken and not self._jobs:  # nothing to do for idle_s: a new thread takes the next job
                        self._counted -= 1
                        return
                future, tool, function, args, kwargs = self._jobs.popleft()
                if not future.set_running_or_notify_cancel():
                    continue
                self._running[future] = (me, tool)
            failure: BaseException | None = None
            try:
                result = function(*args, **kwargs)
            except (StopIteration, KeyboardInterrupt) as exc:
                # neither may cross into an asyncio future as itself: a StopIteration is refused there
                # and leaves the future unsettled, and a KeyboardInterrupt would stop the event loop,
                # though Ctrl-C only ever reaches the main thread: this one is the function's own
                failure = RuntimeError(f"{type(exc).__name__} raised on the tool's thread")
                failure.__cause__ = exc
            except BaseException as exc:  # handed to the caller through the future
                failure = exc
            with self._lock:  # the books first, so whoever sees the result sees them settled
                del self._running[future]
                leaving = me in self._given_up  # its place was given to another thread: end here
                if leaving:
                    self._given_up.discard(me)
                    self._abandoned -= 1
                    self._stuck.pop(future, None)
                    if self._jobs and self._counted < self.workers:
                        self._start()
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result(result)
            if leaving:
                return
