"""The sans-I/O GPT-Live protocol core: frames in, typed events out, client events queued.

One object per connection, like :class:`~voxline.realtime.protocol.RealtimeProtocol` but for
the Live interface (docs/protocol.md §14):

* on a primary WebSocket the first frame is ``session.start`` (:meth:`start`); every other
  command waits until ``session.started`` arrives (the service asks clients to wait), then goes
  out in order; over WebRTC the session was started by the ``POST`` and nothing waits;
* every command carries an ``event_id``, so an ``error`` maps back to it (:class:`LiveCommandFailed`);
* a frame that cannot be decoded is a :class:`~voxline.realtime.notices.MalformedServerEvent`, never fatal; so is
  an event out of place, which is dropped: on a primary WebSocket, any but ``error``, ``info``, ``session.updated`` or
  ``session.closed`` before ``session.started`` (output audio there would shift the track's every later
  sample off the session timeline), and a second ``session.started`` on one connection (it would replace
  the session's id, which a fork after a drop names);
* ``session.closed`` records its reason; received output audio is counted in samples.

It never awaits, never reads a clock and never touches a socket.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import secrets
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import RemoteProtocolError
from ..events.codec import MAX_CLIENT_EVENT_BYTES
from ..frames import DroppedFrame, check_fits, excerpt
from ..notices import MalformedServerEvent
from . import events as lv

__all__ = ["LiveCommandFailed", "LiveOutput", "LiveProtocol"]

_BEFORE_START = (lv.LiveSessionStarted, lv.LiveSessionUpdated, lv.LiveError, lv.LiveInfo, lv.LiveSessionClosed,
                 lv.LiveUnknownEvent)
"""What a primary WebSocket may carry before its ``session.started``: the session, a refusal, a notice, or the end."""
EVENT_HISTORY = 128  # commands remembered for mapping an error back to its command


@dataclass(frozen=True, slots=True)
class LiveCommandFailed:
    """An ``error`` mapped back (by ``event_id``) to the command that caused it."""

    command_type: str | None
    event_id: str | None
    code: str
    message: str
    command: dict[str, Any] | None = field(default=None, repr=False)


LiveOutput = lv.LiveServerEvent | lv.LiveUnknownEvent | MalformedServerEvent | LiveCommandFailed


class LiveProtocol:
    """See the module docstring. ``started``: False until ``session.started`` (True at once over WebRTC)."""

    OPENING_EVENT = "session.started"
    """The event that opens a session, which the server owes every new connection."""

    def __init__(self, *, started: bool = False, rate: int = 24_000) -> None:
        self.rate = rate  # output audio, PCM16 mono
        self.max_event_bytes = MAX_CLIENT_EVENT_BYTES  # the largest event the connection carries (WebRTC: far less)
        self.started = started
        self._opened = False  # a session.started came on this connection (over WebRTC too, where started is True)
        self.session: dict[str, Any] | None = None  # the resolved session, from session.started / updated
        self.close_reason: str | None = None  # from session.closed
        self.closed = False  # the connection is gone (closed by us, the server, or lost), or its session closed
        self.fork_of: str | None = None  # the stored session this connection forks (its start carries overrides only)
        self.received_samples = 0
        self.response_in_progress = False  # no responses for speech: the driver's liveness owes nothing
        self.queued_creates = 0
        self._out: deque[str] = deque()
        self._held: deque[dict[str, Any]] = deque()  # commands waiting for session.started
        self._events: deque[LiveOutput] = deque()
        self._sent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._prefix = "evt_vxl" + secrets.token_hex(3)
        self._ids = itertools.count(1)

    @property
    def opened(self) -> bool:
        """``session.started`` came (a ``session.updated`` alone does not start a session)."""
        return self.started

    # ------------------------------------------------------------------ commands
    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._ids):06d}"

    def start(self, session: dict[str, Any]) -> str:
        """Queue ``session.start`` first on the wire (a primary or fork WebSocket)."""
        payload = lv.LiveStart(session=session, event_id=self._next_id()).model_dump(mode="json")
        return self._queue(payload)  # its id maps a refusal back to it: the session never started

    def send(self, event: lv.LiveClientEvent | dict[str, Any]) -> str:
        """Queue one command (held until the session started); returns its ``event_id``."""
        payload = event if isinstance(event, dict) else event.model_dump(mode="json")
        payload = dict(payload)
        if payload.get("type") != "session.input_audio.append":  # appends have no acknowledgement: no id
            payload.setdefault("event_id", self._next_id())
        check_fits(json.dumps(payload, separators=(",", ":")), payload.get("type"), self.max_event_bytes)
        if not self.started:
            self._held.append(payload)
            return str(payload.get("event_id") or "")
        return self._queue(payload)

    def append_audio(self, pcm: bytes) -> None:
        """Input audio (PCM16 in the session's format); dropped before the session started, as the service would."""
        if not self.started or self.closed:
            return
        self._queue({"type": "session.input_audio.append", "audio": base64.b64encode(pcm).decode("ascii")})

    def _queue(self, payload: dict[str, Any]) -> str:
        event_id = payload.get("event_id")
        if isinstance(event_id, str):
            self._sent[event_id] = {k: v for k, v in payload.items() if k != "audio"}
            while len(self._sent) > EVENT_HISTORY:
                self._sent.popitem(last=False)
        self._out.append(json.dumps(payload, separators=(",", ":")))
        return event_id if isinstance(event_id, str) else ""

    @property
    def has_data_to_send(self) -> bool:
        return bool(self._out)

    def data_to_send(self) -> list[str]:
        out = list(self._out)
        self._out.clear()
        return out

    # ------------------------------------------------------------------ server frames
    def receive(self, text: str | bytes) -> None:
        if isinstance(text, DroppedFrame):
            self._events.append(MalformedServerEvent(str(text), ""))
            return
        try:
            event = lv.parse_live_server(text)
        except RemoteProtocolError as exc:
            raw = text if isinstance(text, str) else text[:32_000].decode("utf-8", "replace")
            self._events.append(MalformedServerEvent(str(exc), excerpt(raw, 2000)))
            return
        if (misplaced := self._misplaced(event)) is not None:
            self._events.append(MalformedServerEvent(misplaced, ""))
            return
        match event:
            case lv.LiveOutputAudioDelta():
                try:
                    audio = base64.b64decode(event.delta, validate=True)
                except (binascii.Error, ValueError):
                    self._events.append(MalformedServerEvent("session.output_audio.delta: audio is not base64", ""))
                    return
                if len(audio) % 2:
                    self._events.append(MalformedServerEvent("session.output_audio.delta: not whole samples", ""))
                    return
                self.received_samples += len(audio) // 2
            case lv.LiveSessionStarted() | lv.LiveSessionUpdated():
                self.session = event.session.model_dump(mode="json")
                if isinstance(event, lv.LiveSessionStarted):
                    self.started = self._opened = True
                    while self._held:
                        self._queue(self._held.popleft())
            case lv.LiveSessionClosed():
                self.close_reason = event.reason
                self.closed = True  # the session is over: this connection carries nothing more, open or not
                self.session = event.session.model_dump(mode="json")
            case lv.LiveError():
                cause = event.error.client_event_id or event.client_event_id
                command = self._sent.get(cause) if cause else None
                self._events.append(event)
                if cause:  # an error naming no command is the event alone
                    self._events.append(LiveCommandFailed(command.get("type") if command else None, cause,
                                                          event.error.code, event.error.message, command))
                return
            case _:
                pass
        self._events.append(event)

    def _misplaced(self, event: lv.LiveServerEvent | lv.LiveUnknownEvent) -> str | None:
        """Why ``event`` cannot come where it came (see the module docstring), or None."""
        if isinstance(event, lv.LiveSessionStarted) and self._opened:
            return "a second session.started on this connection: ignored"
        if self.started or isinstance(event, _BEFORE_START):
            return None
        return f"{event.type} before session.started: ignored"

    def events(self) -> list[LiveOutput]:
        out = list(self._events)
        self._events.clear()
        return out

    def connection_lost(self) -> None:
        self.closed = True

    @property
    def holding(self) -> int:
        """How many commands wait for ``session.started``."""
        return len(self._held)

    def take_held(self) -> list[dict[str, Any]]:
        """The commands held for a ``session.started`` that never came (the connection is gone), for the next
        connection; none are held after this."""
        held, self._held = list(self._held), deque()
        return held

    # ------------------------------------------------------------------ what a driver asks of any core
    def owed_creates(self) -> list[Any]:
        """Nothing: Live has no responses for speech to ask for again."""
        return []

    def sizes(self) -> dict[str, int]:
        return {"live_sent": len(self._sent), "live_held": len(self._held)}
