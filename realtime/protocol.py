"""The sans-I/O Realtime protocol core (client side).

Feed it what the server sent with :meth:`RealtimeProtocol.receive`, ask it to do
things with the command methods, then collect :meth:`events` (parsed server events
and local :mod:`notices <realtime.notices>`, in order) and :meth:`data_to_send`
(JSON text frames). It never awaits, never touches a socket and never reads a clock.

Rules it owns (docs/protocol.md §7, §8, §10):

* one response at a time in the default conversation: ``response.create`` is queued
  while one is active and sent after ``response.done`` (:mod:`voxline.realtime.lifecycle`);
  a create the server refuses as already-active is queued again, never lost;
* ``response.cancel`` is sent only when a response is active; a cancel asked for while
  our create is still in flight is sent as soon as ``response.created`` names it;
* deltas that arrive for a cancelled or dropped response are discarded;
* every client event carries an ``event_id`` so an ``error`` maps back to its command;
* ``conversation.item.truncate`` never asks for more audio than was received, and the
  "already shorter than N ms" error is recovered by truncating at N;
* the order of conversation items, and each response's status up to *unknown* when the
  connection is lost before its ``response.done``.

Memory stays bounded on an all-day connection (:meth:`RealtimeProtocol.sizes`): a dropped
response is forgotten at its ``response.done`` (nothing of it can arrive after), and the
per-item and per-response answers are kept for the most recent ones only: the last
``ITEM_WINDOW`` conversation items and audio parts, the last ``FINISHED_WINDOW`` final
statuses, the last ``EVENT_HISTORY`` commands for mapping errors back. Anything older can no
longer be cut or answered about; the session's conversation mirror keeps the whole history.
"""

from __future__ import annotations

import base64
import json
import re
from collections import OrderedDict, deque
from typing import Any

from voxline.base.audio_format import PCM16_24K, AudioFormat, output_format_of

from . import events as ev
from . import frames
from .events.codec import MAX_CLIENT_EVENT_BYTES
from .errors import LocalProtocolError, RemoteProtocolError
from .lifecycle import TERMINAL_STATUSES, Action, Input, ResponseStatus, Slot, step
from .notices import (
    BetaProtocolDetected,
    CommandFailed,
    MalformedServerEvent,
    Notice,
    ResponseStatusChanged,
    TruncateAdjusted,
)

__all__ = ["EVENT_HISTORY", "FINISHED_WINDOW", "ITEM_WINDOW", "ProtocolOutput", "RealtimeProtocol"]

ProtocolOutput = ev.ServerEvent | Notice

_SHORTER = re.compile(r"Audio content of ([0-9.]+)\s*ms is already shorter than ([0-9.]+)\s*ms")
EVENT_HISTORY = 256  # client events remembered for error mapping (errors come back within a round trip)
ITEM_WINDOW = 128  # conversation items (and audio parts) whose order, kind and received audio are kept
FINISHED_WINDOW = 32  # responses whose final status is kept
_DROPPING = 32  # dropped responses still awaiting their response.done
_FINAL = frozenset({"completed", "cancelled", "incomplete", "failed"})
_STATUS = {
    "completed": ResponseStatus.COMPLETED,
    "cancelled": ResponseStatus.CANCELLED,
    "incomplete": ResponseStatus.INCOMPLETE,
    "failed": ResponseStatus.FAILED,
    "in_progress": ResponseStatus.ACTIVE,
}


class RealtimeProtocol:
    """Client-side protocol state for one Realtime connection."""

    OPENING_EVENT = "session.created"
    """The event that opens a session, which the server owes every new connection."""

    def __init__(self, *, id_prefix: str = "vx") -> None:
        self.max_event_bytes = MAX_CLIENT_EVENT_BYTES
        """The largest event this connection carries, as JSON text (a WebRTC data channel's may be far less)."""
        self._prefix = id_prefix
        self._counter = 0
        self._out: list[str] = []
        self._events: list[ProtocolOutput] = []
        self._slot = Slot.IDLE
        self._queue: deque[dict[str, Any]] = deque()
        self._sent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._oob_pending = 0
        self._active_id: str | None = None
        self._dropping: dict[str, None] = {}  # an ordered set
        self._responses: dict[str, ResponseStatus] = {}  # not final yet
        self._finished: OrderedDict[str, ResponseStatus] = OrderedDict()
        self._requested = 0
        self._items: list[str] = []
        self._item_kind: dict[str, str] = {}
        self._received: dict[tuple[str, int], int] = {}
        self._adjusted: dict[str, None] = {}  # an ordered set
        self._inflight: dict[str, Any] | None = None  # the create that holds the slot, as sent
        self._owed: list[tuple[str | None, dict[str, Any]]] = []
        self.session: dict[str, Any] | None = None
        self.opened = False  # session.created came (a session.updated alone does not open a session)
        self._output_format = PCM16_24K
        self._server_cancels = False
        self._server_creates = False  # the server's VAD answers a committed turn by itself
        self._turn_unanswered = False  # a turn the server committed, whose response has not begun
        self.closed = False

    # ------------------------------------------------------------------ queries
    @property
    def slot(self) -> Slot:
        return self._slot

    @property
    def active_response_id(self) -> str | None:
        """The response writing to the default conversation, if the server named one."""
        return self._active_id if self._slot in (Slot.ACTIVE, Slot.CANCELLING) else None

    @property
    def response_in_progress(self) -> bool:
        return self._slot is not Slot.IDLE

    @property
    def queued_creates(self) -> int:
        return len(self._queue)

    @property
    def items(self) -> list[str]:
        """Ids of the conversation items, in the server's order."""
        return list(self._items)

    def response_status(self, response_id: str) -> ResponseStatus | None:
        """The response's status; None if unknown (or final and older than ``FINISHED_WINDOW``)."""
        return self._responses.get(response_id) or self._finished.get(response_id)

    def sizes(self) -> dict[str, int]:
        """Entries per table, to check that memory stays bounded."""
        return {
            "responses": len(self._responses),
            "finished": len(self._finished),
            "dropping": len(self._dropping),
            "items": len(self._items),
            "item_kinds": len(self._item_kind),
            "received": len(self._received),
            "adjusted": len(self._adjusted),
            "sent": len(self._sent),
            "queued_creates": len(self._queue),
        }

    def is_dropped(self, response_id: str | None) -> bool:
        return response_id is not None and response_id in self._dropping

    def received_audio_ms(self, item_id: str, content_index: int = 0) -> float:
        """Milliseconds of assistant audio received for one content part."""
        return self._received.get((item_id, content_index), 0) / self._bytes_per_ms()

    def received_audio_samples(self, item_id: str, content_index: int = 0) -> int:
        """Samples of assistant audio received for one content part, at the output format's rate.

        The one tally of received audio: the truncate clamp, the session's barge-in plan and
        its reports all read it.
        """
        return self._received.get((item_id, content_index), 0) // self.output_format.bytes_per_sample

    def inherit_received_audio(self, previous: RealtimeProtocol) -> None:
        """Take over the tally of a previous connection's protocol (the conversation goes on)."""
        for key, count in previous._received.items():
            self._received.setdefault(key, count)

    @property
    def output_format(self) -> AudioFormat:
        """The session's ``audio.output.format`` (PCM16 at 24 kHz until one is set)."""
        return self._output_format

    @property
    def server_cancels_on_speech(self) -> bool:
        """True when the server's VAD cancels the active response itself on speech start."""
        return self._server_cancels

    def _on_session(self, session: dict[str, Any]) -> None:
        """Read what the core needs from a session the server sent, whatever its shape."""
        self.session = session
        audio = frames.table(session.get("audio"))
        self._output_format = output_format_of(audio) or PCM16_24K
        td = frames.table(audio.get("input")).get("turn_detection")
        self._server_cancels = isinstance(td, dict) and bool(td) and td.get("interrupt_response", True) is not False
        self._server_creates = isinstance(td, dict) and bool(td) and td.get("create_response", True) is not False

    def _bytes_per_ms(self) -> float:
        return self.output_format.bytes_per_ms

    # ------------------------------------------------------------------ output
    def events(self) -> list[ProtocolOutput]:
        """Server events and notices produced since the last call."""
        out, self._events = self._events, []
        return out

    @property
    def has_data_to_send(self) -> bool:
        """True while frames wait for :meth:`data_to_send`."""
        return bool(self._out)

    def data_to_send(self) -> list[str]:
        """JSON text frames to send, in order, since the last call."""
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ commands
    def _next_id(self) -> str:
        self._counter += 1
        return f"{self._prefix}_{self._counter:06d}"

    def _emit(self, payload: dict[str, Any], *, remember: bool = True, flat: bool = False) -> str:
        """Queue one command. ``flat``: a payload this core built of checked scalars (a truncate, a
        cancel), encoded as it is; any other goes through the client-event models first."""
        if self.closed:
            raise LocalProtocolError(f"cannot send {payload.get('type')}: the connection is closed")
        event_id = payload.get("event_id") or self._next_id()
        payload["event_id"] = event_id
        text = json.dumps(payload, separators=(",", ":")) if flat else ev.encode_client_event(ev.parse_client_dict(payload))
        frames.check_fits(text, payload.get("type"), self.max_event_bytes)
        self._out.append(text)
        if remember:
            self._sent[event_id] = frames.slim(payload)
            while len(self._sent) > EVENT_HISTORY:
                self._sent.popitem(last=False)
        return event_id

    def send(self, event: ev.ClientEvent | dict[str, Any]) -> str | None:
        """Send any client event; ``response.create``/``cancel`` go through the lifecycle rules.

        Returns the ``event_id`` used, or ``None`` when the event was queued or not needed.
        """
        payload = event if isinstance(event, dict) else ev.client_event_dict(event)
        match payload.get("type"):
            case "response.create":
                return self.create_response(payload.get("response"), event_id=payload.get("event_id"))
            case "response.cancel":
                return self._apply(Input.CANCEL)
            case "conversation.item.truncate":
                return self.truncate(payload["item_id"], int(payload["audio_end_ms"]), int(payload.get("content_index", 0)))
            case "input_audio_buffer.append":
                return self._emit(dict(payload), remember=False)
            case _:
                return self._emit(dict(payload))

    def update_session(self, session: dict[str, Any]) -> str:
        """``session.update``; ``session.type`` is required by the GA protocol."""
        if "type" not in session:
            raise LocalProtocolError("session.update needs session.type ('realtime' or 'transcription')")
        return self._emit({"type": "session.update", "session": session})

    def append_audio(self, audio: bytes) -> str:
        """``input_audio_buffer.append`` with raw audio in the session's input format."""
        event_id = self._next_id()
        if self.closed:
            raise LocalProtocolError("cannot append audio: the connection is closed")
        b64 = base64.b64encode(audio).decode("ascii")
        self._out.append(f'{{"type":"input_audio_buffer.append","event_id":"{event_id}","audio":"{b64}"}}')
        return event_id

    def commit_audio(self) -> str:
        return self._emit({"type": "input_audio_buffer.commit"})

    def clear_audio(self) -> str:
        return self._emit({"type": "input_audio_buffer.clear"})

    def create_item(self, item: dict[str, Any], previous_item_id: str | None = None) -> str:
        payload: dict[str, Any] = {"type": "conversation.item.create", "item": item}
        if previous_item_id is not None:
            payload["previous_item_id"] = previous_item_id
        return self._emit(payload)

    def delete_item(self, item_id: str) -> str:
        return self._emit({"type": "conversation.item.delete", "item_id": item_id})

    def retrieve_item(self, item_id: str) -> str:
        return self._emit({"type": "conversation.item.retrieve", "item_id": item_id})

    def truncate(self, item_id: str, audio_end_ms: int, content_index: int = 0) -> str:
        """``conversation.item.truncate``, clamped to the audio received for that part."""
        if self._item_kind.get(item_id, "assistant") != "assistant":
            raise LocalProtocolError(f"item {item_id} is not an assistant audio message; it cannot be truncated")
        if audio_end_ms < 0:
            raise LocalProtocolError("audio_end_ms must be >= 0")
        if (item_id, content_index) in self._received:
            audio_end_ms = min(audio_end_ms, int(self.received_audio_ms(item_id, content_index)))
        if not isinstance(item_id, str) or isinstance(content_index, bool) or not isinstance(content_index, int):
            raise LocalProtocolError("truncate needs a string item_id and an integer content_index")
        return self._emit(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": content_index,
                "audio_end_ms": int(audio_end_ms),
            },
            flat=True,
        )

    def clear_output_audio(self) -> str:
        """``output_audio_buffer.clear`` (WebRTC/SIP only)."""
        return self._emit({"type": "output_audio_buffer.clear"})

    def create_response(self, response: dict[str, Any] | None = None, *, event_id: str | None = None) -> str | None:
        """``response.create``: sent now if the slot is free, else queued until ``response.done``.

        Out-of-band responses (``conversation: "none"``) do not use the slot and go out at once.
        """
        payload: dict[str, Any] = {"type": "response.create"}
        if response:
            payload["response"] = response
        if event_id:
            payload["event_id"] = event_id
        if response and response.get("conversation") == "none":
            self._oob_pending += 1
            return self._emit(payload)
        self._queue.append(payload)
        sent = self._apply(Input.CREATE)
        return sent

    def cancel_response(self) -> bool:
        """``response.cancel`` for the active response; a no-op when nothing is active.

        Returns True when a cancel was sent or will be sent once the server names the response.
        """
        before = self._slot
        self._apply(Input.CANCEL)
        return before is not Slot.IDLE

    def drop_response(self, response_id: str) -> None:
        """Discard any further deltas of ``response_id`` (the server cancelled it itself).

        A response already done sends nothing more: there is nothing to drop.
        """
        if self.response_status(response_id) not in TERMINAL_STATUSES:
            _remember(self._dropping, response_id, _DROPPING)

    def owed_creates(self) -> list[tuple[str | None, dict[str, Any]]]:
        """After :meth:`connection_lost`: the ``response.create`` payloads the conversation is still owed.

        First the response that held the slot, unless we were cancelling it or the server was (a barge-in the
        server's VAD cancels, :meth:`drop_response`): the create we
        sent (or, for a response the server's VAD started, a plain one), with its response id
        when the server had named it; or, for a user turn the server's VAD committed but had not
        begun to answer, a plain one; then every create still queued. Each comes without
        ``event_id``, to be sent once on the next connection.
        """
        return list(self._owed)

    def connection_lost(self) -> None:
        """The transport is gone: responses in flight become *unknown*; nothing more is sent."""
        if self.closed:
            return
        if self._slot in (Slot.REQUESTED, Slot.ACTIVE) and not self.is_dropped(self._active_id):  # not cut by a barge-in
            payload = {k: v for k, v in (self._inflight or {"type": "response.create"}).items() if k != "event_id"}
            self._owed.append((self._active_id, payload))
        elif self._turn_unanswered:  # the server's VAD would have answered it; the new server will not
            self._owed.append((None, {"type": "response.create"}))
        self._owed.extend((None, {k: v for k, v in c.items() if k != "event_id"}) for c in self._queue)
        self._queue.clear()
        self._apply(Input.DISCONNECT)
        self.closed = True
        self._out.clear()

    # ------------------------------------------------------------------ lifecycle
    def _apply(self, inp: Input, command: dict[str, Any] | None = None) -> str | None:
        """One lifecycle step; the ``event_id`` of the create or cancel it sent, if any."""
        self._slot, actions = step(self._slot, inp)
        sent: str | None = None
        for action in actions:
            match action:
                case Action.SEND_CREATE:
                    sent = self._send_next_create()
                case Action.QUEUE_CREATE:
                    pass  # already at the back of the queue
                case Action.REQUEUE_CREATE:
                    if command is not None:
                        again = {k: v for k, v in command.items() if k != "event_id"}
                        self._queue.appendleft(again)
                case Action.DROP_CREATE:
                    self._requested = max(0, self._requested - 1)
                case Action.SEND_CANCEL:
                    payload: dict[str, Any] = {"type": "response.cancel"}
                    if self._active_id:
                        payload["response_id"] = self._active_id
                    sent = self._emit(payload, flat=True)
                case Action.DROP_LATE:
                    if self._active_id:
                        _remember(self._dropping, self._active_id, _DROPPING)
                case Action.FLUSH_QUEUE:
                    if self._queue:
                        sent = self._apply(Input.CREATE)
                case Action.LOSE_ALL:
                    self._lose_all()
        return sent

    def _send_next_create(self) -> str | None:
        if not self._queue:
            # the slot was taken by a CREATE with an empty queue: nothing to send after all
            self._slot = Slot.IDLE
            return None
        self._requested += 1
        self._active_id = None
        self._inflight = self._queue.popleft()
        return self._emit(self._inflight)

    def _lose_all(self) -> None:
        for rid, status in list(self._responses.items()):
            if status in (ResponseStatus.REQUESTED, ResponseStatus.ACTIVE):
                self._set_status(rid, ResponseStatus.UNKNOWN, "connection lost")
        for _ in range(self._requested):
            self._events.append(ResponseStatusChanged(None, ResponseStatus.UNKNOWN, "connection lost"))
        self._requested = 0
        self._active_id = None

    # ------------------------------------------------------------------ input
    def receive(self, text: str | bytes) -> None:
        """Take one frame from the server."""
        if isinstance(text, frames.DroppedFrame):
            self._events.append(MalformedServerEvent(str(text), ""))
            return
        try:
            event = ev.parse_server_event(text)
        except RemoteProtocolError as exc:
            self._events.append(MalformedServerEvent(exc.message, frames.excerpt(text)))
            return
        problem = frames.problem(event, self.output_format.bytes_per_sample)
        if problem is not None:
            self._events.append(MalformedServerEvent(problem, frames.excerpt(text)))
            return
        if isinstance(event, ev.ResponseDone) and event.response.status not in _FINAL | {None}:
            self._events.append(MalformedServerEvent(
                f"response.done with status {frames.short(event.response.status)}, which is not final: treated as failed",
                frames.excerpt(text)))
            event = event.model_copy(update={"response": event.response.model_copy(update={"status": "failed"})})
        if self._handle(event):
            self._events.append(event)

    def _handle(self, event: ev.ServerEvent) -> bool:
        """Update state for one server event; False means the event is dropped."""
        match event:
            case ev.ResponseOutputAudioDelta():
                if event.response_id in self._dropping:
                    return False
                key = (event.item_id, event.content_index)
                if key not in self._received:
                    _remember(self._received, key, ITEM_WINDOW, 0)
                self._received[key] += frames.b64_len(event.delta)
                return True
            case ev.ResponseCreated():
                if event.response.conversation_id is not None or not self._oob_pending:
                    self._turn_unanswered = False
                self._on_created(event.response)
                return True
            case ev.InputAudioBufferCommitted():
                self._turn_unanswered = self._server_creates
                return True
            case ev.ResponseDone():
                self._on_done(event.response)
                return True
            case ev.ErrorEvent():
                self._on_error(event.error)
                return True
            case ev.SessionCreated() | ev.SessionUpdated():
                self.opened = self.opened or isinstance(event, ev.SessionCreated)
                self._on_session(event.session.model_dump(exclude_none=False))
                return True
            case ev.ConversationItemAdded() | ev.ConversationItemCreated():
                self._on_item_added(event.item, event.previous_item_id)
                if getattr(type(event), "beta", False):
                    self._events.append(BetaProtocolDetected(event.type, "conversation.item.added"))
                return True
            case ev.ConversationItemDeleted():
                if event.item_id in self._items:
                    self._items.remove(event.item_id)
                self._item_kind.pop(event.item_id, None)
                return True
            case ev.BetaServerEvent():
                self._events.append(BetaProtocolDetected(event.type, event.ga_type))
                return True
            case ev.OutputAudioBufferStarted() | ev.OutputAudioBufferStopped() | ev.OutputAudioBufferCleared():
                return True  # the server's playback state, still true after a cancel
            case _:
                rid = getattr(event, "response_id", None)  # an undeclared field of an event may hold anything
                return not (isinstance(rid, str) and rid in self._dropping)

    def _on_created(self, response: ev.Response) -> None:
        rid = response.id
        if response.conversation_id is None and self._oob_pending and self._slot is not Slot.REQUESTED:
            self._oob_pending -= 1
            self._set_status(rid, ResponseStatus.ACTIVE)
            return
        self._set_status(rid, ResponseStatus.ACTIVE)
        if self._slot in (Slot.REQUESTED, Slot.REQUESTED_CANCEL):
            self._requested = max(0, self._requested - 1)
        self._active_id = rid
        self._apply(Input.CREATED)

    def _on_done(self, response: ev.Response) -> None:
        rid = response.id
        status = _STATUS.get(response.status or "", ResponseStatus.COMPLETED)
        reason = None
        if response.status_details is not None:
            reason = getattr(response.status_details, "reason", None) or (
                response.status_details.get("reason") if isinstance(response.status_details, dict) else None
            )
        self._set_status(rid, status, reason)
        self._dropping.pop(rid, None)  # nothing of it arrives after response.done
        if rid == self._active_id:
            self._active_id = None
            self._inflight = None
            self._apply(Input.DONE)

    def _set_status(self, rid: str, status: ResponseStatus, reason: str | None = None) -> None:
        if self.response_status(rid) == status:
            return
        if status in TERMINAL_STATUSES:
            self._responses.pop(rid, None)
            self._finished.pop(rid, None)
            _remember(self._finished, rid, FINISHED_WINDOW, status)
        else:
            self._finished.pop(rid, None)
            self._responses[rid] = status
        self._events.append(ResponseStatusChanged(rid, status, reason))

    def _on_item_added(self, item: Any, previous_item_id: str | None) -> None:
        item_id = getattr(item, "id", None)
        if not isinstance(item_id, str) or not item_id:
            return  # an unknown kind of item may carry anything as its id: none of ours to track
        role, type_ = getattr(item, "role", None), getattr(item, "type", None)
        kind = role if isinstance(role, str) and role else type_ if isinstance(type_, str) and type_ else "item"
        self._item_kind[item_id] = kind
        if item_id in self._items:
            return
        if len(self._items) >= ITEM_WINDOW:
            self._item_kind.pop(self._items.pop(0), None)  # the oldest can no longer be cut
        if previous_item_id is None or previous_item_id == "root":
            index = 0  # no predecessor: the item is first
        elif previous_item_id in self._items:
            index = self._items.index(previous_item_id) + 1
        else:
            index = len(self._items)
        self._items.insert(index, item_id)

    def _on_error(self, error: ev.ErrorDetail) -> None:
        command = self._sent.get(error.event_id) if error.event_id else None
        ctype = command.get("type") if command else None
        handled = False
        match ctype, error.code:
            case "response.create", "conversation_already_has_active_response":
                self._apply(Input.CREATE_REJECTED, command)
                handled = True
            case "response.create", _:
                if command is not None and (command.get("response") or {}).get("conversation") == "none":
                    self._oob_pending = max(0, self._oob_pending - 1)
                else:
                    self._apply(Input.CREATE_FAILED, command)
            case "response.cancel", "response_cancel_not_active":
                self._apply(Input.CANCEL_NOT_ACTIVE)
                handled = True
            case "conversation.item.truncate", "invalid_value":
                handled = self._retry_truncate(command, error.message)
            case _:
                pass
        self._events.append(CommandFailed(ctype, error.event_id, error.code, error.message, handled, command))

    def _retry_truncate(self, command: dict[str, Any] | None, message: str) -> bool:
        match = _SHORTER.search(message or "")
        if command is None or match is None:
            return False
        item_id = command["item_id"]
        if item_id in self._adjusted:
            return False
        _remember(self._adjusted, item_id, ITEM_WINDOW)
        available = int(float(match.group(1)))
        key = (item_id, command.get("content_index", 0))
        self._received[key] = min(self._received.get(key, 0), int(available * self._bytes_per_ms()))
        self._emit(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": command.get("content_index", 0),
                "audio_end_ms": available,
            }
        )
        self._events.append(TruncateAdjusted(item_id, int(command["audio_end_ms"]), available))
        return True


def _remember(table: dict[Any, Any], key: Any, limit: int, value: Any = None) -> None:
    """Insert ``key`` as the newest entry of an insertion-ordered table of at most ``limit``."""
    table[key] = value
    while len(table) > limit:
        del table[next(iter(table))]
