"""The half of :class:`~voxline.session.voice.VoiceSession` that outlives a connection.

After a drop, :meth:`Continuity._reconnect` opens a new connection within the session's
budget and :meth:`Continuity._restore` recreates the conversation on it: the mirror's items
and tool outputs, exactly one ``response.create`` for each one owed (:mod:`.restore`), and
the turn the user was speaking (:class:`~voxline.session.input_journal.InputJournal`).
Before a session's ``expires_at``, :meth:`Continuity._maybe_hand_over` warms a successor up
and switches at the first turn boundary. ``VoiceSession`` is the one class that uses it; the
attributes below are the session's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from voxline.base.clock import Clock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed, RealtimeError

from .bargein import Trigger
from .events import ConnectionLost, ConnectionRestored, SessionError
from .restore import Owed, creates_owed, handover_due

if TYPE_CHECKING:
    from .core import Effects, SessionCore
    from .input_chunks import InputChunker
    from .input_journal import InputJournal
    from .media import Output
    from .mirror import ConversationMirror
    from .reconnect import ReconnectBudget
    from .settings import SessionSettings
    from .tool_bridge import ToolBridge

__all__ = ["Continuity"]

_log = logging.getLogger("voxline.session")


class Continuity:
    """Drops and hand-overs of a :class:`~voxline.session.voice.VoiceSession` (see the module docstring)."""

    settings: SessionSettings
    clock: Clock
    output: Output
    core: SessionCore | None
    mirror: ConversationMirror
    journal: InputJournal
    _conn: RealtimeConnection | None
    _live: bool
    _closing: bool
    _connected_at: float | None
    _last_rx: float
    _budget: ReconnectBudget
    _queue: asyncio.Queue[object]
    _tools: ToolBridge
    _chunker: InputChunker
    _texts_while_away: int
    _spare: asyncio.Task[RealtimeConnection] | None
    _handing_over: bool

    if TYPE_CHECKING:  # VoiceSession's own
        async def _open(self, *, adopt: bool = True) -> RealtimeConnection: ...
        def _adopt(self, conn: RealtimeConnection) -> None: ...
        async def _apply(self, effects: Effects) -> None: ...
        async def _flush(self) -> None: ...
        async def _close_quietly(self, conn: RealtimeConnection, code: int = 1000, reason: str = "") -> None: ...
        def _drain_tools(self, conn: RealtimeConnection) -> None: ...
        @property
        def idle(self) -> bool: ...

    async def _reconnect(self, exc: ConnectionClosed) -> bool:
        """After a drop: reconnect within the budget, restore config and conversation. False if given up."""
        assert self.core is not None and self._conn is not None
        lost = self._conn
        self._live = False
        now = self.output.now()
        self._budget.lost(self.clock.now(), self._connected_at)
        self._queue.put_nowait(ConnectionLost(exc.code, exc.reason, now))
        _log.warning("connection lost (close code %s %s); reconnecting", exc.code, exc.reason)
        cut_short = False
        if self.core.assistant_audible(now):  # the listener hears no more of it: the conversation keeps what they heard
            effects = self.core.interrupt(now, Trigger.CONNECTION_LOST)
            await self._apply(effects)
            cut_short = effects.barge_in is not None and effects.barge_in.unplayed_ms + effects.barge_in.in_device_ms > 0
        owed = lost.protocol.owed_creates()
        while (delay := self._budget.next_delay(self.clock.now())) is not None:
            await self.clock.sleep(delay)
            if self._closing:
                return False
            try:
                conn = await self._open()
            except (RealtimeError, OSError) as failure:
                _log.warning("reconnect failed: %s", failure)
                self._queue.put_nowait(SessionError(f"reconnect failed: {failure}", "reconnect_failed"))
                continue
            try:
                restored = self._restore(conn, owed, cut_short)
                self._conn, self._live, self._connected_at = conn, True, self.clock.now()
                self._last_rx = self.clock.now()
                await conn.flush()
            except ConnectionClosed as closed:  # it closed at once: the next try still owes everything
                self._live = False
                self._budget.lost(self.clock.now(), None)
                self._queue.put_nowait(SessionError(f"reconnect failed: the new connection closed at once "
                                                    f"({closed.code})", "reconnect_failed"))
                owed = conn.protocol.owed_creates() if conn.protocol.closed else owed
                continue
            self._queue.put_nowait(restored)
            _log.info("connection restored")
            await self._flush()
            return True
        _log.error("the connection is lost and could not be restored (%d tries)", self._budget.used)
        self._queue.put_nowait(SessionError(
            f"the connection is lost and could not be restored ({self._budget.used} tries)", "connection_lost",
            fatal=True))
        return False

    def _restore(self, conn: RealtimeConnection, owed: list[Owed],
                 cut_short: bool, *, handover: bool = False) -> ConnectionRestored:
        """Recreate the conversation on ``conn``: items, tool outputs, owed responses, the unfinished turn.

        Exactly one ``response.create`` for each one owed: responses with tool calls are
        followed up by the tool tracker once their outputs are in; a response the drop left
        unfinished, or cut short for the listener, is asked for again otherwise; and one for
        each message sent while away.
        """
        protocol = conn.protocol
        if self.settings.call_id is not None:  # a sideband: the call kept its conversation and its response
            return ConnectionRestored(self.output.now(), 0, 0, 0.0, handover)
        plan = self.mirror.plan_rebuild(self.journal.audio_of)
        for command in plan.commands:
            protocol.send(command)
        self.mirror.adopt_rebuild(plan)
        tracker = self._tools.tracker
        followed = set(tracker.unsettled_responses())
        for rid in followed:
            tracker.on_response_done(rid, "completed")  # the rebuilt conversation lets the model go on
        self._drain_tools(conn)
        creates = creates_owed(owed, followed, cut_short=cut_short, texts_while_away=self._texts_while_away)
        self._texts_while_away = 0
        resumed = None
        if handover:
            self.journal.restart(unsent=self._chunker.held)  # those go on the new connection
        else:
            self._chunker.clear()  # the journal's resend holds them
            resumed = self.journal.resume(push_to_talk=self.settings.turn_detection == "none")
        if resumed is not None and len(resumed):
            protocol.append_audio(resumed.astype("<i2").tobytes())
        for payload in creates:
            protocol.send(payload)
        return ConnectionRestored(self.output.now(), len(plan.item_ids), len(creates),
                                  (len(resumed) if resumed is not None else 0) * 1000 / self.journal.rate, handover)

    async def _maybe_hand_over(self, conn: RealtimeConnection) -> None:
        """Before ``expires_at``: warm up a successor, then switch at the first turn boundary."""
        if self._handing_over:
            return
        opened = self._connected_at if self._connected_at is not None else 0.0
        wall = self.clock.wall()
        if not handover_due((conn.protocol.session or {}).get("expires_at"), wall_now=wall,
                            opened_wall=wall - (self.clock.now() - opened), margin_s=self.settings.handover_s):
            return
        if self._spare is None:
            self._spare = asyncio.ensure_future(self._open(adopt=False))
            return
        if not self._spare.done() or not self.idle or self.core is None or self.core.user_speaking:
            return
        spare, self._spare = self._spare, None
        try:
            fresh = spare.result()
        except (RealtimeError, OSError) as failure:
            self._queue.put_nowait(SessionError(f"could not prepare the next connection: {failure}", "handover_failed"))
            return
        self._handing_over = True
        try:
            self._adopt(fresh)
            restored = self._restore(fresh, [], False, handover=True)
            self._conn, self._connected_at, self._last_rx = fresh, self.clock.now(), self.clock.now()
            with contextlib.suppress(ConnectionClosed):
                await fresh.flush()
            await self._close_quietly(conn, 1000, "handed over")
        finally:
            self._handing_over = False
        self._queue.put_nowait(restored)
