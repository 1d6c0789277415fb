"""Bulk work in small steps, at most a few steps per pass of the event loop.

Work that comes faster than it is needed (the frames of replies streamed ahead of real
time, for hundreds of sessions on one loop) must not hold up the work that is due now:
output blocks, microphone sends, timers. asyncio runs every callback that is ready in one
pass of its loop before it looks at its timers again, so 200 sessions that each handle
one frame make one pass, and every timer in it, 200 frames late.

A task doing bulk work awaits :meth:`LoopShare.turn` between steps. In each pass of the
loop the first :data:`STEPS_PER_PASS` turns go on at once; the others wait, in the order
they came, and in each following pass that many of them go on, or a sixteenth of those
waiting if that is more. A task's turn lasts a slice (:class:`Slices`, :data:`SLICE_S`):
the steps it makes within it go on without asking again. A timer is then late by a few
slices of bulk work, not by all of it, and the share never caps how fast bulk work gets
done: while tasks keep coming back each waits at most about :data:`MAX_WAIT_PASSES`
passes, however many share the loop. A loop with little bulk work never waits.

Work that a listener waits for is not bulk, however it came: a session whose listener has less
than :data:`SHORT_OF_AUDIO_S` of a reply left to play (the reply has just begun, or the loop fell
behind) streams or handles that reply without asking for a turn, :data:`SHORT_RUN` steps at most
before it asks again (so that a loop where every listener is short still shares). Sessions whose
replies are seconds ahead of their listeners wait instead: the same work is done, in the order
that keeps every listener's audio coming.

One :class:`LoopShare` per event loop (:func:`loop_share`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from .clock import forget_closed_loops, loop_table

__all__ = ["MAX_WAIT_PASSES", "SHORT_OF_AUDIO_S", "SHORT_RUN", "SLICE_S", "STEPS_PER_PASS", "LoopShare", "Slices", "loop_share"]

STEPS_PER_PASS = 8  # a few hundred microseconds of bulk work per pass when few tasks have some
MAX_WAIT_PASSES = 16  # with many waiting, a sixteenth of them go on per pass
SLICE_S = 0.00015  # how long one task's turn lasts: two or three frames of a reply
SHORT_OF_AUDIO_S = 0.5  # a listener with less than this of a reply left to play is waited for: no turn asked
SHORT_RUN = 16  # steps a session short of audio makes without a turn before it asks for one all the same


class LoopShare:
    """Turns for bulk steps on one event loop: :data:`STEPS_PER_PASS` (or ``steps``) per pass."""

    def __init__(self, steps: int = STEPS_PER_PASS) -> None:  # holds no reference to its loop: the loop keys it weakly
        if steps < 1:
            raise ValueError("a pass must allow at least one step")
        self._steps = steps
        self._left = steps  # turns that go on at once in this pass
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._armed = False  # a pass boundary (_next_pass) is scheduled

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def turn(self) -> None:
        """Return once this task may do its next step (at once while the pass has turns left)."""
        ticket = self.ticket()
        if ticket is not None:
            await ticket

    def ticket(self) -> asyncio.Future[None] | None:
        """A turn: None if it goes at once, else the future its turn resolves. A ticket resolved or
        cancelled before then (its holder let go early) is skipped and uses no turn."""
        loop = asyncio.get_running_loop()
        if self._left > 0 and not self._waiting:
            self._left -= 1
            self._arm(loop)
            return None
        future = loop.create_future()
        self._waiting.append(future)
        self._arm(loop)
        return future

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._armed:
            self._armed = True
            loop.call_soon(self._next_pass, loop)  # runs in the next pass, after what is ready now

    def _next_pass(self, loop: asyncio.AbstractEventLoop) -> None:
        self._armed = False
        waiting = self._waiting
        self._left = max(self._steps, -(-len(waiting) // MAX_WAIT_PASSES))
        while waiting and self._left > 0:
            future = waiting.popleft()
            if not future.done():
                future.set_result(None)
                self._left -= 1
        if waiting or self._left < self._steps:
            self._arm(loop)


class Slices:
    """One task's turns, each lasting :data:`SLICE_S`: steps within a slice go on without asking.

    A task with a backlog then works it off several steps per turn instead of one, while a
    pass of the loop still holds at most a slice per turn.
    """

    def __init__(self, share: LoopShare, slice_s: float = SLICE_S) -> None:
        self._share = share
        self._slice = slice_s
        self._until = -1.0
        self._ticket: asyncio.Future[None] | None = None  # the turn being waited for

    async def next(self) -> None:
        """Return once the next step may go (at once while this task's slice lasts)."""
        if time.perf_counter() < self._until:
            return
        await self.wait()

    @property
    def over(self) -> bool:
        """This task's slice is used up: its next step waits for a turn (:meth:`next` would)."""
        return time.perf_counter() >= self._until

    async def wait(self) -> None:
        """Return once this task has a new turn, whatever is left of its slice: work that can come
        after what other tasks are waiting to do."""
        ticket = self._share.ticket()
        if ticket is not None:
            self._ticket = ticket
            try:
                await ticket
            finally:
                self._ticket = None
        self._until = time.perf_counter() + self._slice

    def go_now(self) -> None:
        """End the wait for a turn at once (something urgent came in): the task goes on in the next pass
        of the loop. Safe from any callback of the loop; does nothing while the task is not waiting."""
        ticket = self._ticket
        if ticket is not None and not ticket.done():
            ticket.set_result(None)


_shares = loop_table()


def loop_share() -> LoopShare:
    """The :class:`LoopShare` of the running event loop."""
    loop = asyncio.get_running_loop()
    share = _shares.get(loop)
    if share is None:
        forget_closed_loops()
        share = _shares[loop] = LoopShare()
    return share
