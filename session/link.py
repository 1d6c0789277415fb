"""A session's connection over time: opening, closing, drops, liveness and hand-overs.

:class:`Link` is the I/O half of continuity; what a new connection must be told is the
:class:`~voxline.session.machine.SessionMachine`'s to decide (:meth:`~SessionMachine.restore`).

* After a drop, :meth:`Link.reconnect` tells the machine (which cuts what was audible), then
  opens a new connection within the session's :class:`~.reconnect.ReconnectBudget`, sleeping
  its backoff on the session's clock, and has the machine restore the conversation on it. A
  sideband refused with 404 gives up at once: its call ended (hung up), and no later try can
  attach to it.
* :meth:`Link.watch` runs every few hundred ms. A server that owes something (the event that
  opens its session, ``session.created`` or GPT-Live's ``session.started``, or a response asked
  for) and sends nothing for ``liveness_timeout_s`` (counted from when it came to owe it, at the
  earliest) is a drop, whatever its socket answers: a pong shows the socket is there, not that
  the server is. The opening is owed ``liveness_timeout_s`` after the connect however much else
  the server says meanwhile: no other event opens a session. A quiet server that owes nothing is pinged now and then; a ping it leaves
  unanswered is a drop too. Before ``expires_at`` it warms up a successor and switches to it
  at the first turn boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable

from voxline.base.clock import Clock, wait_within
from voxline.base.contain import Raised, contain, outcome, run_apart
from voxline.base.errors import message_of
from voxline.base.log_output import SAID_AS_EVENT
from voxline.base.loop_runner import hold
from voxline.base.shown import clip
from voxline.realtime.connection import RealtimeConnection, WireObserver
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveCommandFailed
from voxline.realtime.notices import CommandFailed
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed, RealtimeError

from .events import SessionError, SessionEvent, how_closed
from .machine import Effects
from .machines import Machine
from .reconnect import ReconnectBudget
from .restore import handover_due
from .settings import SessionSettings

__all__ = ["Link"]

_log = logging.getLogger("voxline.session")
Connector = Callable[[], Awaitable[RealtimeConnection]]


_SAID_WAIT_S = 1.0  # a transport hands over what it holds at once: this only bounds one that does not


async def _said_before_closing(conn: RealtimeConnection, clock: Clock) -> str | None:
    """What a server that closed a connection being set up said before it closed: its first error (``server: …
    (code)``), Realtime's or GPT-Live's, from what the transport already held; ``None`` if it said none."""
    reading = asyncio.ensure_future(conn.last_words())
    if not await wait_within(clock, _SAID_WAIT_S, reading):
        reading.cancel()
        return None
    for out in reading.result():
        if isinstance(out, (CommandFailed, LiveCommandFailed)):
            command, message, code = out.command_type, out.message, out.code
        elif isinstance(out, lv.LiveError):  # a Live error that names no command of the client's (a refused key)
            command, message, code = None, out.error.message, out.error.code
        else:
            continue
        said = f"{command or 'server'}: {clip(message.rstrip('.'), 300)}"
        return said + (f" ({clip(code, 64)})" if code else "")
    return None


class Link:
    """The connection a session's conversation is on (see the module docstring)."""

    def __init__(self, machine: Machine, settings: SessionSettings, clock: Clock, connector: Connector, *,
                 budget: ReconnectBudget, now: Callable[[], float], apply: Callable[[Effects], Awaitable[None]],
                 publish: Callable[[SessionEvent], None], idle: Callable[[], bool],
                 observer: WireObserver | None = None) -> None:
        self.machine = machine
        self.observer = observer
        """An observer each connection from the connector is given (an app's on_wire beside its own connector)."""
        self.settings = settings
        self.clock = clock
        self._connector = connector
        self._budget = budget
        self._now = now  # listener time
        self._apply = apply
        self._publish = publish
        self._idle = idle
        self.conn: RealtimeConnection | None = None
        self.closing = False
        self.handing_over = False
        self._handed_over = asyncio.Event()  # set while no hand-over is under way
        self._handed_over.set()
        self._connected_at: float | None = None
        self._began = False  # a connection before the current one opened its session
        self.last_rx = 0.0
        self._heard_until: float | None = None  # a connection given up for silence held only until its last event
        self._owed_since: float | None = None  # when the server came to owe what it owes now (seen by watch)
        self._spare: asyncio.Task[RealtimeConnection | Raised] | None = None  # the next connection, warming up
        self._ping: asyncio.Future[None] | None = None
        self._ping_sent = 0.0  # when the ping in flight went, on the session's clock
        self._pong_at = -float("inf")  # the last answer to a ping (it is not an event from the server)
        # per connection: when it opened on the session's clock, and then on the server's (or the local) wall
        self._opened: weakref.WeakKeyDictionary[RealtimeConnection, tuple[float, float, bool]] = \
            weakref.WeakKeyDictionary()
        # per connection: the machine's config_version it was configured with (an update may come after)
        self._config: weakref.WeakKeyDictionary[RealtimeConnection, int] = weakref.WeakKeyDictionary()

    @property
    def began(self) -> bool:
        """Whether a connection of this session ever opened its session (``session.created``, GPT-Live's
        ``session.started``; a sideband joins its call's, open already). A server that refused every connect (an
        ``error`` and a close, each time) never did: whatever it said, nothing it said was a session's."""
        conn = self.conn
        return self._began or (conn is not None and (conn.protocol.opened or self.settings.call_id is not None))

    async def open(self) -> RealtimeConnection:
        """The first connection, configured and the conversation's."""
        self.conn = conn = await self._configured()
        self.machine.attach(conn.protocol)
        self._connected_at = self.last_rx = self.clock.now()  # a clock need not start at 0
        return conn

    async def _configured(self) -> RealtimeConnection:
        """A new connection, sent the session's configuration; closed again if that fails."""
        made = self._connector()
        if not inspect.isawaitable(made):
            raise ConfigurationError(f"the connector returned {type(made).__name__}, not an awaitable: make it an "
                                     "async function that returns a RealtimeConnection")
        conn = await made
        if not isinstance(conn, RealtimeConnection):
            raise ConfigurationError(f"the connector gave {type(conn).__name__}, not a RealtimeConnection")
        if self.observer is not None:  # the app's own connector's connections show their frames to on_wire too
            conn.add_wire_observer(self.observer)
        try:
            server_time = getattr(conn.transport, "server_time", None)
            self._opened[conn] = (self.clock.now(), *((server_time, True) if isinstance(server_time, (int, float))
                                                      else (self.clock.wall(), False)))
            self.machine.configure(conn.protocol)
            self._config[conn] = self.machine.config_version
            await conn.flush()
        except ConnectionClosed as exc:  # a server that refuses at once (a bad key): an error, then the close
            said = await _said_before_closing(conn, self.clock)
            await self.close_quietly(conn)
            if said is None:
                raise
            raise ConnectionFailed(f"the server closed the connection while it was being set up: it said {said}; "
                                   f"{how_closed(exc.code, exc.reason)}") from None
        except BaseException:
            await self.close_quietly(conn)  # never left open behind a failed open or reconnect
            raise
        return conn

    def _take_over(self, conn: RealtimeConnection) -> None:
        """The conversation moves onto ``conn``, reconfigured if the app updated the session since it was opened."""
        self.machine.attach(conn.protocol)
        if self._config.get(conn) != self.machine.config_version:
            self.machine.configure(conn.protocol)
            self._config[conn] = self.machine.config_version

    async def flush(self) -> None:
        """Tool outputs into the live connection, then everything queued on it to the transport."""
        conn = self.conn
        if conn is not None and self.machine.carrying and not conn.closed:
            self.machine.drain_tools()
            with contextlib.suppress(ConnectionClosed):
                await conn.flush()

    async def _in_time(self, seconds: float) -> RealtimeConnection:
        """A new connection (:meth:`_configured`) within ``seconds`` of the session's clock, what is left of the
        reconnect window: an app's connector that never returns is one failed try, not a session reconnecting for
        ever. One that ignores its cancel is left to end alone."""
        attempt = run_apart(self._configured())
        taken = False
        try:
            if await wait_within(self.clock, seconds, attempt) and not attempt.cancelled():
                taken = True
                return outcome(attempt.result())
        finally:
            if not taken:  # too late, or this task was cancelled (the session closes): what it made is closed
                attempt.cancel()
                attempt.add_done_callback(self._close_made)
                hold(attempt)
        raise ConnectionFailed(f"no connection within the {seconds:.3g} s left of reconnect_window_s")

    def _close_made(self, attempt: asyncio.Future[RealtimeConnection | Raised]) -> None:
        """A done callback: a connection an attempt made after it was given up on, closed."""
        if not attempt.cancelled() and isinstance(made := attempt.result(), RealtimeConnection):
            hold(asyncio.ensure_future(self.close_quietly(made)))

    def begin_close(self) -> None:
        """The session is closing: no reconnect, no command from now on; a ping in flight is dropped."""
        self.closing = True
        if self._ping is not None:
            self._ping.cancel()

    async def close(self) -> None:
        """Stop: the warming successor and a ping in flight are dropped, the connection closed."""
        self.begin_close()
        if self._spare is None:
            if self.conn is not None:
                await self.close_quietly(self.conn)
            return
        closes = [self._drop_spare()]  # side by side: both within close_timeout_s
        if self.conn is not None:
            closes.append(self.close_quietly(self.conn))
        await asyncio.gather(*closes)

    async def _drop_spare(self) -> None:
        """The successor warming up (or ready) is not needed: stop it, and close it if it opened."""
        spare, self._spare = self._spare, None
        if spare is None:
            return
        if not spare.done():
            spare.cancel()
            await asyncio.wait((spare,))
        if spare.cancelled() or spare.exception() is not None or isinstance(made := spare.result(), Raised):
            return
        await self.close_quietly(made)

    async def close_quietly(self, conn: RealtimeConnection, code: int = 1000, reason: str = "") -> None:
        """Close ``conn`` within ``close_timeout_s`` on the session's clock; errors are the peer's business.

        A close the peer leaves unanswered that long (a server gone silent) is cut short: the connection is given
        up (:meth:`RealtimeConnection.abandon`), so the receive loop takes the drop now, not at the transport's
        own timeout."""
        closing = asyncio.ensure_future(conn.close(code, reason))
        try:
            await wait_within(self.clock, self.settings.close_timeout_s, closing)
        finally:
            if not closing.done():
                conn.abandon()
                closing.cancel()
            with contextlib.suppress(asyncio.CancelledError, RealtimeError, OSError):
                await closing
            conn.protocol.connection_lost()

    # ------------------------------------------------------------------ drops
    async def reconnect(self, exc: ConnectionClosed) -> bool:
        """After a drop: reconnect within the budget and restore the conversation. False if given up
        (or if the session was ended on purpose: a GPT-Live session closed at the app's request or for content)."""
        if self.machine.ended:
            return False
        # a connection whose session never began did not hold: it refills no budget
        held = self.conn is not None and (self.conn.protocol.opened or self.settings.call_id is not None)
        self._began = self._began or held  # the next connection takes its place
        heard_until, self._heard_until = self._heard_until, None
        self._budget.lost(self.clock.now(), self._connected_at if held else None, heard_until)
        _log.warning("connection lost (close code %s%s); reconnecting", exc.code, f" {exc.reason}" if exc.reason else "",
                     extra=SAID_AS_EVENT)
        await self._apply(self.machine.connection_lost(self._now(), exc.code, exc.reason))  # the cut first
        await self._drop_spare()  # warmed up for the lost connection; the next one warms its own
        gone: str | None = None  # why no later try can succeed: the call a sideband was attached to is no more
        while (delay := self._next_delay()) is not None:
            await self.clock.sleep(delay)
            if self.closing:
                return False
            try:
                conn = await self._in_time(self._budget.time_left(self.clock.now()))
            except BaseException as failure:  # the app's connector may raise anything: it is one failed try
                contain(failure)
                text = _failure_text(failure)
                _log.warning("reconnect failed: %s", text, extra=SAID_AS_EVENT)
                self._publish(SessionError(f"reconnect failed: {text}", "reconnect_failed"))
                if self.settings.call_id is not None and isinstance(failure, ConnectionFailed) and failure.status == 404:
                    gone = f"the call {self.settings.call_id} is no more (HTTP 404)"
                    break
                continue
            self._take_over(conn)
            restored = self.machine.restore(self._now())
            self.conn, self._connected_at, self.last_rx = conn, self.clock.now(), self.clock.now()
            try:
                await conn.flush()
            except ConnectionClosed as closed:  # it closed at once: the next try still owes everything
                self.machine.reconnect_failed(conn.protocol)
                self._budget.lost(self.clock.now(), None)
                self._publish(SessionError(f"reconnect failed: the new connection closed at once ({closed.code})",
                                           "reconnect_failed"))
                continue
            self._publish(restored)
            _log.info("connection restored", extra=SAID_AS_EVENT)
            await self.flush()
            return True
        spent = gone or self._budget.spent(self.clock.now())
        _log.error("the connection is lost and could not be restored: %s", spent, extra=SAID_AS_EVENT)
        self._publish(SessionError(f"the connection is lost and could not be restored: {spent}", "connection_lost",
                                   fatal=True))
        return False

    def _next_delay(self) -> float | None:
        """The budget's next delay; an app's backoff that failed is reported once (the default stands in)."""
        reported = self._budget.backoff_failure
        delay = self._budget.next_delay(self.clock.now())
        failure = self._budget.backoff_failure
        if failure is not None and failure != reported:
            self._publish(SessionError(f"the reconnect backoff failed ({failure}); using the default", "backoff_failed"))
        return delay

    # ------------------------------------------------------------------ liveness and hand-over
    async def watch(self) -> None:
        """Liveness of the server, and the hand-over before the session's time runs out."""
        conn, now = self.conn, self.clock.now()
        assert conn is not None
        timeout = self.settings.liveness_timeout_s
        if timeout:
            silent = now - self.last_rx  # events from the server only
            owed = self._owed(conn)
            if owed is None:
                self._owed_since = None
            elif self._owed_since is None:
                self._owed_since = now
            # silence counts from the later of its last event and the moment it came to owe: a
            # question after a quiet minute gives the server its round trip to answer; but what it
            # says while it owes the session's opening does not open it, so that is counted from the connect
            since = self._owed_since or now
            opening = owed == self._opening(conn)
            waiting = since if opening else max(self.last_rx, since)
            if owed is not None and now - waiting >= timeout:
                said = (f"still owes {owed} {now - since:.1f} s after the connect" if opening
                        else f"owes {owed} and sent nothing for {silent:.1f} s")
                await self._give_up(conn, f"the server {said}; reconnecting")
                return
            ping = getattr(conn.transport, "ping", None)
            if ping is not None and self._ping is None and now - max(self.last_rx, self._pong_at) >= timeout / 2:
                self._ping_sent = now
                self._ping = asyncio.ensure_future(self._ping_once(conn, ping))
            elif self._ping is not None and now - self._ping_sent >= timeout / 2:
                await self._give_up(conn, f"the server sent nothing for {silent:.1f} s and did not answer a ping; "
                                          "reconnecting")
                return
        await self._maybe_hand_over(conn)

    def _owed(self, conn: RealtimeConnection) -> str | None:
        """What the server owes this connection now, if anything."""
        if not conn.protocol.opened and self.settings.call_id is None:
            return self._opening(conn)
        if conn.protocol.response_in_progress:
            return "a response"
        return None

    @staticmethod
    def _opening(conn: RealtimeConnection) -> str:
        return f"its {conn.protocol.OPENING_EVENT}"

    async def _give_up(self, conn: RealtimeConnection, message: str) -> None:
        """A silent server: report it and close the connection; the receive loop reconnects."""
        _log.warning("%s", message, extra=SAID_AS_EVENT)
        conn.protocol.connection_lost()  # given up on: from now on the session is away, and keeps what it is given
        self._heard_until = self.last_rx  # it held as long as it spoke, not as long as it took to be given up
        self._publish(SessionError(message, "server_silent"))
        if self._ping is not None:
            self._ping.cancel()
            self._ping = None
        await self.close_quietly(conn, 4000, "server silent")

    async def _ping_once(self, conn: RealtimeConnection, ping: Callable[[], Awaitable[None]]) -> None:
        """Ask a quiet server whether its socket is there; the answer paces the next ping."""
        try:
            await ping()
        except (RealtimeError, OSError):
            pass  # the receive loop sees the close
        else:
            if conn is self.conn:
                self._pong_at = self.clock.now()
        finally:
            if self._ping is asyncio.current_task():
                self._ping = None

    async def _maybe_hand_over(self, conn: RealtimeConnection) -> None:
        """Before ``expires_at``: warm up a successor, then switch at the first turn boundary.

        Not for a sideband: its ``expires_at`` is its call's, which no new connection outlives.
        """
        if self.handing_over or self.settings.call_id is not None:
            return
        opened = self._opened.get(conn)
        if opened is None:
            return
        at, opened_wall, server_clock = opened
        if not handover_due((conn.protocol.session or {}).get("expires_at"), opened_at=opened_wall,
                            elapsed_s=self.clock.now() - at, margin_s=self.settings.handover_s,
                            server_clock=server_clock):
            return
        if self._spare is None:
            self._spare = run_apart(self._configured())  # a connector's SystemExit: one failure
            return
        core = self.machine.core
        if not self._spare.done() or not self._idle() or core is None or core.user_speaking:
            return
        spare, self._spare = self._spare, None
        try:
            fresh = outcome(spare.result())
        except BaseException as failure:  # the app's connector may raise anything: the hand-over fails, not the session
            contain(failure)
            self._publish(SessionError(f"could not prepare the next connection: {_failure_text(failure)}",
                                       "handover_failed"))
            return
        self.handing_over = True
        self._handed_over.clear()
        try:
            self._take_over(fresh)
            self._began = self.began  # the connection handed over held a session (its expires_at said when)
            restored = self.machine.restore(self._now(), handover=True)
            self.conn, self._connected_at, self.last_rx = fresh, self.clock.now(), self.clock.now()
            with contextlib.suppress(ConnectionClosed):
                await fresh.flush()
            await self.close_quietly(conn, 1000, "handed over")
        finally:
            self.handing_over = False
            self._handed_over.set()
        self._publish(restored)

    async def hand_over_finished(self) -> None:
        """Return once no hand-over is under way (at once when none is)."""
        await self._handed_over.wait()


def _failure_text(failure: BaseException) -> str:
    """What a failed connect says: our errors and the system's as they are, anything else with its type."""
    text = message_of(failure)
    return text if isinstance(failure, (RealtimeError, OSError)) else f"{type(failure).__name__}: {text}"
