"""The connections that carry one GPT-Live session in turn, and what passes from one to the next (sans-I/O).

After a drop nothing resumes (docs/protocol.md §14): a stored session is forked, else a new one
starts with the conversation as text. :class:`LiveCarrier` knows which protocol carries the
session now and decides what the next connection is (a fork or a new session, and what was lost:
:class:`~voxline.session.events.LiveContinuity`, told at its ``session.started``). Commands wait
in one place at a time: here while no connection carries the session (at most
:data:`MAX_KEPT_AWAY`), then in the new protocol, which holds them for its ``session.started``
and hands them back (:meth:`LiveCarrier.keep_held`) if it is lost before then. The input's mute
and a fork's note on the reply cut last go to a new connection before them. It also knows the
client delegations the session on this connection asked for: a drop loses them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from voxline.base.redaction import redact
from voxline.base.ordered import keep_newest
from voxline.realtime.errors import ConfigurationError, LocalProtocolError
from voxline.realtime.frames import check_fits
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveProtocol

from ..events import LiveContinuity, SessionError, SessionEvent, StateChanged
from .delegated import DELEGATIONS

__all__ = ["LOST_ON_DROP", "LOST_WITHOUT_STORE", "MAX_KEPT_AWAY", "LiveCarrier"]

MAX_KEPT_AWAY = 256  # commands kept for the next session while the connection is replaced
_MUTING = ("session.input_audio.mute", "session.input_audio.unmute")
LOST_ON_DROP = ("audio-level context", "delegations in flight")
LOST_WITHOUT_STORE = ("the model's own conversation (only the user's words and what was heard are given back, as text)",
                      *LOST_ON_DROP)


class LiveCarrier:
    """The protocol carrying the session, and what the next one is owed (see the module docstring)."""

    def __init__(self) -> None:
        self.current: LiveProtocol | None = None  # the latest connection's protocol (None before the first)
        self.attached = False  # a connection is attached (until its drop is taken or the session ends)
        self.resuming = False  # from a drop until the next session started
        self.connections = 1
        self.session_id: str | None = None
        self.started_at: float | None = None  # when the current connection's session started
        self.fork_from: str | None = None  # the stored session the next connection forks (set on a drop)
        self.continuity: LiveContinuity | None = None  # what the next session is told of the drop
        self._muted = False  # the input as the app (or push-to-talk) last left it: a new session is told again
        self._away: list[dict[str, Any]] = []  # commands given while no connection carries the session
        self._away_ids = itertools.count(1)
        self._not_sent = 0  # commands kept while away that the next connection could not carry, not told yet
        self._asked: dict[str, None] = {}  # client delegations the session on this connection asked for, the newest
        self._lost_asks: dict[str, None] = {}  # those of sessions a drop lost: the next session does not know them

    @property
    def carrying(self) -> bool:
        """A connection is attached and carries the session: not once its protocol is closed, though its drop is
        not taken yet; commands meanwhile are kept for the next connection (:meth:`command`)."""
        return self.attached and self.current is not None and not self.current.closed

    @property
    def ended(self) -> bool:
        """The server closed the session for good: at the app's request or for its content (no reconnect)."""
        return self.current is not None and self.current.close_reason in ("close_requested", "content")

    @property
    def protocol(self) -> LiveProtocol:
        if self.current is None:
            raise ConfigurationError("the session is not open; use 'async with VoiceSession(...)'")
        return self.current

    # ------------------------------------------------------------------ one connection after another
    def attach(self, protocol: LiveProtocol) -> bool:
        """``protocol`` carries the session now; whether it replaces an earlier one (a new session)."""
        replaced = self.current is not None
        if replaced:
            self.connections += 1
            self.started_at = None
        self.current = protocol
        self.attached = True
        return replaced

    def hand_over(self, note: str | None) -> None:
        """What the session owes a new connection, into its protocol, which holds it until its ``session.started``
        (and hands it back, :meth:`keep_held`, if it is lost before then): the input muted again if the app had
        muted it (a new session starts unmuted: the model would hear the microphone again), a fork told ``note``,
        what the listener heard of the reply cut last, then the commands the app gave meanwhile, in order."""
        protocol = self.protocol
        if self._muted:
            protocol.send(lv.LiveMute())
        if note is not None:
            protocol.send(lv.LiveInstructionsAppend(content=note))
        away, self._away = self._away, []
        for payload in away:
            try:
                protocol.send(payload)
            except LocalProtocolError:  # larger than the new connection carries (WebRTC after a WebSocket)
                self._not_sent += 1

    def connection_lost(self, now: float, *, store: bool) -> None:
        """The connection dropped: its delegations and held commands are lost or kept, and the next connection
        forks the session if ``store`` kept it, else starts a new one."""
        self.attached = False
        self.resuming = True
        self._lost_asks.update(self._asked)  # delegations in flight are lost with their session
        self._asked.clear()
        keep_newest(self._lost_asks, DELEGATIONS)
        self.keep_held()
        stored = store and self.session_id is not None
        self.fork_from = self.session_id if stored else None
        self.continuity = LiveContinuity("fork" if stored else "new", self.session_id,
                                         LOST_ON_DROP if stored else LOST_WITHOUT_STORE, now)

    def fork_refused(self, why: str) -> bool:
        """The stored session could not be forked: the next connection starts a new session (what was lost, and
        why, told in its continuity). Whether a fork was due."""
        if self.fork_from is None:
            return False
        self.fork_from = None
        if self.continuity is not None:
            self.continuity = dataclasses.replace(self.continuity, how="new", lost=LOST_WITHOUT_STORE,
                                                  refused=redact(why))
        return True

    def reconnect_failed(self) -> None:
        self.attached = False
        self.keep_held()

    def keep_held(self) -> None:
        """Commands the lost connection held for a ``session.started`` that never came go to the next one, before
        any given since; but for mute and unmute, which the next one is given from the state the app left."""
        if self.current is not None:
            held = [p for p in self.current.take_held() if p.get("type") not in _MUTING]
            self._away[:0] = held

    def session_started(self, now: float, session_id: str) -> list[SessionEvent]:
        """This connection's session started (its protocol sent what it held) and listens: the replacement, if
        any, is over; commands kept meanwhile that it could not carry are told, and what a drop lost."""
        self.started_at = now
        self.session_id = session_id
        events: list[SessionEvent] = [*self._resume(), StateChanged("listening", now)]
        continuity = self.take_continuity()
        if continuity is not None:
            events.append(continuity)
        return events

    def _resume(self) -> list[SessionEvent]:
        if not self.resuming:
            return []
        self.resuming = False
        skipped, self._not_sent = self._not_sent, 0
        if not skipped:
            return []
        return [SessionError(f"{skipped} command{'s' if skipped > 1 else ''} given while the connection was "
                             "replaced did not fit an event of the new connection: not sent", "commands_not_sent")]

    def take_continuity(self) -> LiveContinuity | None:
        out, self.continuity = self.continuity, None
        return out

    # ------------------------------------------------------------------ commands
    def command(self, event: lv.LiveClientEvent) -> str:
        """Send ``event`` (held until its session started); while no connection carries the session, keep it
        for the next one (:meth:`hand_over`). Its ``event_id`` either way."""
        carrying = self.carrying
        if carrying and self.protocol.started:
            return self.protocol.send(event)
        if len(self._away) + (self.protocol.holding if carrying else 0) >= MAX_KEPT_AWAY:
            raise ConfigurationError(f"{MAX_KEPT_AWAY} commands wait for a session that has not started; wait until "
                                     "it listens (StateChanged 'listening') before giving more")
        if carrying:
            return self.protocol.send(event)
        payload = event.model_dump(mode="json")
        payload["event_id"] = payload.get("event_id") or f"evt_vxl_away{next(self._away_ids):06d}"
        check_fits(json.dumps(payload, separators=(",", ":")), payload.get("type"), self.protocol.max_event_bytes)
        self._away.append(payload)
        return str(payload["event_id"])

    def set_muted(self, muted: bool) -> None:
        """Mute or unmute the model's input now (held until its session started), or, while away, on the next
        connection (:meth:`hand_over`)."""
        self._muted = muted
        if self.carrying:
            self.protocol.send(lv.LiveMute() if muted else lv.LiveUnmute())

    # ------------------------------------------------------------------ client delegations
    def asked(self, delegation_id: str) -> None:
        """The session on this connection delegated work to the client."""
        self._asked[delegation_id] = None
        keep_newest(self._asked, DELEGATIONS)

    def check_known(self, delegation_id: str) -> None:
        """An answer to ``delegation_id`` can go: a session that asked for it carries this one."""
        if not self.carrying or self.resuming:
            raise ConfigurationError(f"delegation {delegation_id!r} was the lost session's, and the connection is "
                                     "being replaced: the next session does not know it")
        if delegation_id in self._lost_asks:
            raise ConfigurationError(f"delegation {delegation_id!r} was asked for by a session a dropped connection "
                                     "lost: this session does not know it (delegations in flight are lost on a drop)")
