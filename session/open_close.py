"""How one :class:`~voxline.session.voice.VoiceSession` opens and closes.

Open: the parts it owns claimed (:class:`~.claims.Claims`), the first connection made in a task
of its own that :meth:`OpenClose.close` can cancel (what the connector raises is raised to the
caller; a server that closes during the set-up is a ``ConnectionFailed``), its sound devices
started, then the tool runner (entered on the session's exit stack) and the loops in one
``asyncio.TaskGroup``. Whatever fails on the
way closes what was opened and lets go of the claims.

Close: safe to call twice and from any task of the session. The loops are cancelled, the
machine's last records taken at the output's time, and the teardown (the connection's close,
the loops' end, the devices' close off the loop) runs in a task of its own: a caller cancelled
while it waits leaves it running to its end, and a later call waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

from voxline.audio.clocked_output import Output
from voxline.audio.recording import Recording
from voxline.base import collector
from voxline.base.contain import Raised, being_cancelled, outcome, run_apart
from voxline.base.errors import AudioError, message_of
from voxline.base.loop_runner import hold
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed

from .claims import Claims
from .event_outlet import EventOutlet
from .link import Link
from .machine import Captured
from .machines import Machine
from .session_devices import SessionDevice, close_devices
from .tools import ToolRunner

__all__ = ["OpenClose"]

_log = logging.getLogger("voxline.session")


class OpenClose:
    """One session's open and close (see the module docstring); ``start_loops`` starts its loops in a task group."""

    def __init__(self, machine: Machine, link: Link, output: Output, events: EventOutlet, claims: Claims,
                 runner: ToolRunner, input: AsyncIterable[Captured] | None,
                 start_loops: Callable[[asyncio.TaskGroup], list[asyncio.Task[None]]]) -> None:
        self._machine = machine
        self._link = link
        self._output = output
        self._events = events
        self._claims = claims
        self._runner = runner
        self._input = input
        self._start_loops = start_loops
        self._stack = contextlib.AsyncExitStack()
        self.tasks: list[asyncio.Task[None]] = []
        self._opening: asyncio.Task[Any] | None = None  # the first connection being made (close cancels it)
        self.closed_at: float | None = None  # the listener time at the close: the figures stop there
        self._teardown: asyncio.Task[None] | None = None  # the close's own task, once begun
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop it was opened on: commands come from there

    def own_loop(self) -> None:
        """Refuse a command from another event loop than the one the session was opened on."""
        if self.loop is not None and asyncio.get_running_loop() is not self.loop:
            raise ConfigurationError("this session belongs to another event loop: use it where it was opened")

    async def open(self, devices: Sequence[SessionDevice]) -> None:
        """Open the session, with ``devices``, which it starts here and closes at its close."""
        if self.loop is not None or self._link.closing:  # before anything connects: nothing to leak
            raise ConfigurationError("this session is already open" if not self._link.closing else
                                     "a closed session cannot be opened again: make a new VoiceSession")
        if not self._is_device(devices):  # an output of the app's must tell the time: once here, not per event
            try:
                self._output.now()
            except AudioError as exc:
                raise ConfigurationError(f"the session's output cannot tell the time ({exc}): start it before the "
                                         "session opens, or use VoiceSession.on_devices") from None
        self._claims.take()
        self.loop = asyncio.get_running_loop()
        collector.settle()  # once per process: no collector pause walks what the process holds before its sessions
        # in a task close() can cancel (a cancel of this task reaches it too); what the connector raises, raised here
        opening = self._opening = run_apart(self._link.open())
        try:
            outcome(await opening)
        except BaseException as exc:
            caller_cancelled = isinstance(exc, asyncio.CancelledError) and being_cancelled()
            if self._link.closing and not caller_cancelled:  # close() stopped the open; its close has what it made
                raise _closed_while_opening() from None
            if opening.done() and not opening.cancelled() and not isinstance(opening.result(), Raised):
                # the caller was cancelled just as the connection was made: it is closed, and the session with it
                self.closed_at = 0.0
                await asyncio.shield(self._link.close())
                self._let_go()
                raise
            self.loop = None  # nothing opened: the session may be opened again
            self._let_go()
            if isinstance(exc, ConnectionClosed):
                raise ConnectionFailed(f"the server closed the connection while it was being set up "
                                       f"({exc.code} {exc.reason})".strip()) from None
            raise
        finally:
            self._opening = None
        if self._link.closing:  # close() came as the connection was made: its close has it
            raise _closed_while_opening()
        try:
            for device in devices:
                device.start()
        except BaseException:
            self.closed_at = 0.0  # a device that would not start: nothing was heard, and the session cannot go on
            try:
                await close_devices(devices)
            finally:  # a cancel in the devices' close (a stuck driver's 2 s) still closes the connection
                await asyncio.shield(self._link.close())
                self._let_go()
            raise
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        await self._stack.enter_async_context(self._runner)
        self.tasks = self._start_loops(group)

    async def close(self, devices: Sequence[SessionDevice]) -> None:
        """Close the connection and stop every loop, ``devices`` closed last (see the module docstring)."""
        self.own_loop()
        if self._teardown is None:
            if isinstance(self._input, Recording):
                if self.tasks or self._input.captured:  # it was read (or its task was started): read once, let go of
                    self._input.close()
                else:  # never read (no open, or one that failed): the caller's again, for another session to take
                    self._input.release()
            if self._link.closing:  # an open that failed closed what it had opened
                return
            if self._opening is not None:  # still connecting: that stops, and open() says the session was closed
                self._opening.cancel()
            for task in self.tasks:
                task.cancel()
            self.closed_at = self._output_time(devices)
            self._events.put_all(self._machine.close(self.closed_at))
            self._link.begin_close()  # from now on the session takes no command
            # in a task of its own, in a copy of this context
            self._teardown = asyncio.get_running_loop().create_task(self._tear_down(devices))
            self._teardown.add_done_callback(_log_failed_close)
            hold(self._teardown)
        elif self._teardown.done():  # closed; a failure was raised to the first caller still waiting, and logged
            return
        await asyncio.shield(self._teardown)

    def _output_time(self, devices: Sequence[SessionDevice]) -> float:
        """The output's clock at the close. One that cannot tell it (devices that never started, an app's output whose
        device went) gives where its audio stopped, else 0.0 (nothing was heard): the close goes on all the same."""
        try:
            return self._output.now()
        except Exception as failure:  # an app's output is the app's code: it must not keep the connection open
            if not self._is_device(devices):
                _log.warning("the output's clock failed at the close (%s: %s); the figures stop where its audio did",
                             type(failure).__name__, message_of(failure))
            stopped = self._output.playout.next_time
            return 0.0 if stopped is None else stopped

    async def _tear_down(self, devices: Sequence[SessionDevice]) -> None:
        try:
            await self._link.close()
            self._events.end()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stack.aclose()
            await close_devices(devices)
        finally:
            self._let_go()

    def _is_device(self, devices: Sequence[object]) -> bool:
        """The output is one of the session's own devices (on_devices): not an output of the app's."""
        return self._output in devices

    def _let_go(self) -> None:
        """The parts this session claimed are free for the next (a session refused them, or never opened, has
        none to let go: another open session's stay its own); a reply cut short is not the next session's to play."""
        if self._claims.let_go():
            self._output.playout.clear()


def _closed_while_opening() -> ConfigurationError:
    return ConfigurationError("the session was closed (aclose) while it was being opened")


def _log_failed_close(teardown: asyncio.Task[None]) -> None:
    """A close that failed is logged, whether or not a caller was still waiting for it."""
    if not teardown.cancelled() and (failure := teardown.exception()) is not None:
        _log.error("closing the session failed: %s: %s", type(failure).__name__, failure, exc_info=failure)
