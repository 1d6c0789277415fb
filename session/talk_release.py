"""Push-to-talk let go: the turn is committed once the microphone's media track has sent its end.

Over WebRTC the track still holds the turn's last frames when the key is let go; the commit waits
until the track has sent them (:meth:`~.input_feed.InputFeed.track_sent`, tens of milliseconds;
at once over a WebSocket), so the server does not commit the turn without its end. A caller
cancelled while it waits commits the turn all the same (the flush loop sends it); a second let-go
meanwhile returns once the turn let go first is committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from voxline.base.clock import Clock

from .event_outlet import EventOutlet
from .input_feed import InputFeed
from .link import Link
from .machines import Machine

__all__ = ["TalkRelease"]


class TalkRelease:
    """One session's push-to-talk let-go (see the module docstring); ``wake_flush`` wakes the flush loop."""

    def __init__(self, machine: Machine, feed: InputFeed, link: Link, clock: Clock, events: EventOutlet, *,
                 now: Callable[[], float], wake_flush: Callable[[], None]) -> None:
        self._machine = machine
        self._feed = feed
        self._link = link
        self._clock = clock
        self._events = events
        self._now = now  # listener time
        self._wake_flush = wake_flush
        self._committing: asyncio.Future[None] | None = None  # a released turn waiting for its commit

    async def release(self) -> None:
        """Stop sending, commit what was said, and ask for a response."""
        turn = self._machine.release_talking(self._now())
        if not turn:
            if self._committing is not None:  # let go twice: return when the turn let go first is committed
                await asyncio.shield(self._committing)
            return
        committed = self._committing = asyncio.get_running_loop().create_future()
        try:
            try:
                await self._feed.track_sent(self._clock)
            finally:  # cancelled while waiting, the turn is committed all the same; the flush task writes it
                said, waiting = self._machine.commit_talking(self._now(), turn)
                if waiting:
                    self._wake_flush()
                self._events.put_all(said.events)  # why there was no commit, if there was none: said all the same
            if waiting:
                await self._link.flush()
        finally:
            committed.set_result(None)
            if self._committing is committed:
                self._committing = None
