"""Stopping a long command cleanly: SIGINT, SIGTERM and SIGHUP handled alike.

CI systems stop jobs with SIGTERM (a timeout, a cancel, ``docker stop``, a pod ending), a
closed terminal sends SIGHUP, a user presses Ctrl-C. The first of them sets
:attr:`Stop.event`: a replay ends at its next step and writes what it has (HEARD.wav, the
event log, ``--report``/``--summary``), a farm starts nothing more, ends its running
recordings the same way and writes results and JUnit for all of them, the unfinished marked
``error``. A second signal (more than a second later: sooner, it is the first one delivered
twice, as ``timeout`` or a shell passes it on) gives up at once (``KeyboardInterrupt``). The command then exits
with 128 + the signal's number (130, 143, 129), as a shell reports a job killed by it.

A stop signal the command started with ignored stays ignored (:mod:`voxline.base.stop_signals`, as
under ``nohup``).

The handlers are plain :func:`signal.signal` ones (not the loop's), so they run even while
the main thread waits in synchronous code (a Ray driver); they hand the event to the loop
thread-safely.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, Self

from voxline.base.stop_signals import heeded

__all__ = ["Stop"]

REPEAT_S = 1.0  # a signal this soon after the first is the same stop delivered twice, not a second one

Handler = Callable[[int, FrameType | None], Any] | int | None


class Stop:
    """``with Stop(loop) as stop:`` — :attr:`event` is set by the first stop signal."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, *,
                 note: str = "stopping; what finished is kept and written (again to stop at once)") -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.note = note
        self.event = asyncio.Event()
        self.signal: signal.Signals | None = None
        self._previous: dict[int, Handler] = {}
        self._heeded: tuple[signal.Signals, ...] | None = None  # as the first install found them
        self._at = 0.0

    @property
    def stopped(self) -> bool:
        return self.signal is not None

    @property
    def name(self) -> str:
        return self.signal.name if self.signal is not None else ""

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (the shell's convention), or 0 if none came."""
        return 128 + int(self.signal) if self.signal is not None else 0

    def install(self) -> None:
        """(Re)install the handlers: after a library that sets its own (Ray's init sets SIGTERM's). A signal
        ignored at the first install is left alone, then and after."""
        if self._heeded is None:
            self._heeded = heeded()
        for sig in self._heeded:
            previous = signal.signal(sig, self._on_signal)
            if previous is not self._on_signal:
                self._previous.setdefault(sig, previous)

    def _on_signal(self, number: int, _frame: FrameType | None) -> None:
        if self.signal is not None:
            if time.monotonic() - self._at < REPEAT_S:
                return  # the same stop delivered twice (to the process and through a parent that passes it on)
            raise KeyboardInterrupt  # a second signal: stop waiting for the clean end
        self.signal, self._at = signal.Signals(number), time.monotonic()
        print(f"voxline: {self.name}: {self.note}", file=sys.stderr, flush=True)
        self.loop.call_soon_threadsafe(self.event.set)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> Self:
        self.install()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.restore()
