"""What one session hands its application: its events in order, and the first fatal error among them.

The events wait in an :class:`~.event_queue.EventQueue` (one reader at a time, an end that loses
none). The first fatal :class:`~.events.SessionError` put there, whether the driver's own (a loop
that failed) or the machine's (a GPT-Live session whose start was refused), is kept as
:attr:`EventOutlet.failed`: the session can do no more, and its commands say so from then on.
:meth:`EventOutlet.pending` is the non-waiting read, only on the session's event loop while that runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from voxline.realtime.errors import ConfigurationError

from .app_events import AppEvent
from .event_queue import EventQueue
from .events import SessionError

__all__ = ["EventOutlet"]


class EventOutlet:
    """One session's events for its application (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: EventQueue[AppEvent] = EventQueue()
        self.failed: SessionError | None = None  # the first fatal error: the session can do no more

    def put(self, event: AppEvent) -> None:
        if isinstance(event, SessionError) and event.fatal and self.failed is None:
            self.failed = event
        self._queue.put(event)

    def put_all(self, events: Iterable[AppEvent]) -> None:
        for event in events:
            self.put(event)

    def end(self) -> None:
        """No reader waits from now on: the events still queued, then the end."""
        self._queue.end()

    async def next(self) -> AppEvent:
        return await self._queue.get()

    def pending(self, loop: asyncio.AbstractEventLoop | None) -> list[AppEvent]:
        """The events queued so far, without waiting; while ``loop`` (the session's) runs, only on it: the queue is
        the loop's, and another thread's drain would race it."""
        if loop is not None and loop.is_running():
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:  # a plain thread: the app's UI, say
                running = None
            if running is not loop:
                raise ConfigurationError("pending_events() runs on the session's event loop, which is running in "
                                         "another thread: call it there (loop.call_soon_threadsafe)")
        return self._queue.drain()
