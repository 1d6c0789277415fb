"""The loops a :class:`~voxline.session.voice.VoiceSession` runs in its task group while it is open.

receive (server events into the machine, each event's effects applied; on a real clock each waits
its turn on the loop's share, :mod:`voxline.base.loop_share`), tick (the machine's tick every
block unless the output's own pass does it, liveness and the hand-over every ``WATCH_S``), flush
(what tools and commands queued, sent: a tool's report reaches the machine through
:meth:`SessionLoops.tool_event`, which wakes it), and when the session has them the input
(:class:`~.input_feed.InputFeed`), the device watch (:func:`~.device_loop.device_watch_loop`) and
the output's own loop. Each runs through :func:`~.loop_guard.guarded`: one that raises is a
``SessionError``, never a cancel of the task that opened the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Awaitable, Callable

from voxline.audio.clocked_output import ClockedOutput, Output
from voxline.audio.device_watch import Watched
from voxline.base.clock import Clock, RealClock
from voxline.base.loop_share import SHORT_OF_AUDIO_S, SHORT_RUN, Slices, loop_share
from voxline.base.errors import message_of
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed

from .device_loop import device_watch_loop
from .event_outlet import EventOutlet
from .events import SessionError
from .input_feed import InputFeed
from .link import Link
from .loop_guard import guarded, let_go_if_stuck
from .machine import NO_EFFECTS, Captured, Effects, SessionMachine
from .machines import Machine
from .tools import ToolEvent

__all__ = ["SessionLoops", "TICK_S", "WATCH_S"]

TICK_S = 0.02
WATCH_S = 0.2  # liveness and hand-over are checked this often (their limits are seconds)
_log = logging.getLogger("voxline.session")

_SPEECH_STARTED = ev.InputAudioBufferSpeechStarted.model_fields["type"].default
_STREAMED = (ev.ResponseOutputAudioDelta, ev.ResponseOutputAudioTranscriptDelta)  # a reply's stream, interleaved


class SessionLoops:
    """One session's loops; ``apply`` does what the machine's effects leave to I/O; a loop that fails is reported
    among ``events``."""

    def __init__(self, machine: Machine, link: Link, output: Output, clock: Clock, events: EventOutlet, *,
                 apply: Callable[[Effects, Slices | None], Awaitable[None]]) -> None:
        self._machine = machine
        self._link = link
        self._output = output
        self._clock = clock
        self._events = events
        self._apply = apply
        self.flush_needed = asyncio.Event()  # set when something waits to be sent (the flush loop sends it)
        self._observer_reported: RealtimeConnection | None = None  # on_wire failed on it, and the app was told
        self._event_failure_logged: RealtimeConnection | None = None  # handling an event on it failed, logged

    def start(self, group: asyncio.TaskGroup, feed: InputFeed, blocks: AsyncIterable[Captured] | None,
              watched: tuple[Watched, ...]) -> list[asyncio.Task[None]]:
        """Every loop of the session in ``group``, guarded: one that raised would otherwise cancel the task that
        opened the session."""
        output, clock, report = self._output, self._clock, self._events.put
        clocked = isinstance(output, ClockedOutput)
        loops = [guarded(self.receive_loop, "receive loop", report),
                 guarded(lambda: self.tick_loop(clocked), "tick loop", report),
                 guarded(self.flush_loop, "flush loop", report)]
        if blocks is not None:  # a broken input ends the input, not the session
            async def feed_in(blocks: AsyncIterable[Captured] = blocks) -> None:
                await feed.run(blocks)

            loops.append(guarded(lambda: let_go_if_stuck(feed_in, "input", clock), "input", report, fatal=False))
        if watched:
            loops.append(guarded(lambda: device_watch_loop(watched, clock, self._events.put, output.now),
                                 "device watch", report, fatal=False))
        if isinstance(output, ClockedOutput):
            output.after_read = self.tick  # the output's pass ticks the machine: one timer, not two
            if isinstance(self._machine, SessionMachine):  # and only once a tick could change something
                output.tick_gate = self._machine.tick_gate  # (a Live machine keeps no quiet horizon: every pass)
            loops.append(guarded(output.run, "output", report))
        return [group.create_task(loop) for loop in loops]

    async def receive_loop(self) -> None:
        # on a real clock each server event but a barge-in's waits its turn (:mod:`voxline.base.loop_share`):
        # replies streamed ahead of real time for many sessions do not hold up the outputs and
        # microphones of the loop, nor another session's barge-in
        share = Slices(loop_share()) if isinstance(self._clock, RealClock) else None
        playout = self._output.playout
        short = SHORT_OF_AUDIO_S * playout.rate  # a listener with less left to play than this is waited for
        urgent = SHORT_RUN  # deltas that may still go without a turn this turn, for a listener short of audio
        link = self._link
        watched: RealtimeConnection | None = None
        ahead = 0  # events that go without a turn: those read ahead of a speech_started
        turned = True  # a turn was taken since the last run of events without one
        while not link.closing:
            conn = link.conn
            assert conn is not None
            if share is not None and conn is not watched:  # a barge-in read while this waits for a turn ends the wait
                conn.watch_for(_SPEECH_STARTED, share.go_now)
                watched = conn
            try:
                out = await conn.recv()
            except ConnectionClosed as exc:
                if conn is not link.conn:
                    continue  # a connection handed over: its successor carries on
                if link.handing_over:  # the successor closed while being switched to: a drop, once it is
                    await link.hand_over_finished()
                    continue
                # a session that failed can do no more: its drop ends it, as the budget spent does
                if link.closing or self._events.failed is not None or not await link.reconnect(exc):
                    self._events.end()
                    return
                continue
            # a barge-in never waits for its cut: it is made where the listener is now; nor do the events
            # read ahead of it (the reply it cuts), which would hold it up by as many turns. One such run
            # per turn, of a few dozen events at most: a server sending nothing but barge-ins still
            # shares the loop
            if share is not None and not isinstance(out, ev.InputAudioBufferSpeechStarted):
                if ahead > 0:
                    ahead -= 1
                elif share.over:
                    if urgent > 0 and isinstance(out, _STREAMED) and playout.queued_samples < short:
                        urgent -= 1  # its listener would run out of audio while this waited: a reply begun
                    elif (found := conn.queued(_SPEECH_STARTED) if turned else None) is None:
                        await share.wait()
                        turned, urgent = True, SHORT_RUN
                    else:
                        ahead, turned = found, False
            if conn is not link.conn:
                continue  # the last words of a connection handed over (perhaps while this one waited)
            link.last_rx = self._clock.now()
            if conn.observer_failures and self._observer_reported is not conn:
                self._observer_reported = conn
                self._events.put(SessionError("the wire observer (on_wire) failed; every frame is still sent "
                                             "and read (the first failure is logged)", "observer_failed"))
            try:
                effects = self._machine.receive(out, self._output.now())
                if effects is NO_EFFECTS and not conn.has_data_to_send:
                    continue  # the bulk of a reply: nothing to publish or send
                await self._apply(effects, share)
            except Exception as exc:  # containment: no server event may end the session
                kind = getattr(out, "type", type(out).__name__)
                if self._event_failure_logged is not conn:  # one traceback a connection: a cause that stays
                    self._event_failure_logged = conn  # (an app output's clock) fails every event after it too
                    _log.exception("failed to handle %s (the next failures on this connection are said as "
                                   "events only)", kind)
                self._events.put(SessionError(f"could not handle {kind}: {type(exc).__name__}: {message_of(exc)}",
                                             "event_failed"))

    def tool_event(self, event: ToolEvent) -> None:
        """A tool runner's report: its events published, and what it queued sent by the flush loop."""
        self._events.put_all(self._machine.tool_event(event, self._output.now()).events)
        self.flush_needed.set()

    def tick(self) -> None:
        self._events.put_all(self._machine.tick(self._output.now()).events)

    async def tick_loop(self, clocked: bool) -> None:
        """The machine's tick every block (unless the output's own pass does it), liveness every WATCH_S."""
        watch_at = self._clock.now()
        while True:
            await self._clock.sleep(WATCH_S if clocked else TICK_S)
            if not clocked:
                self.tick()
            if self._machine.carrying and not self._link.closing and self._clock.now() >= watch_at:
                watch_at = self._clock.now() + WATCH_S
                await self._link.watch()

    async def flush_loop(self) -> None:
        while True:
            await self.flush_needed.wait()
            self.flush_needed.clear()
            await self._link.flush()
