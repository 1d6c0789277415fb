"""Sans-I/O bookkeeping of function calls for one session (docs/protocol.md §9).

Feed it ``response.function_call_arguments.done`` (:meth:`CallTracker.on_arguments_done`),
``response.done`` (:meth:`~CallTracker.on_response_done`), deleted items and tool
results; collect the client events to send with :meth:`~CallTracker.commands`. It never
awaits and never reads a clock. Its state exports to a plain JSON-able dict, so a new
connection (or process) continues without running any tool twice.

Rules:

* a call becomes runnable only on ``…arguments.done``; a ``call_id`` seen before (pending,
  running, answered, dropped; also after an export/import) is never returned again;
* :meth:`~CallTracker.begin` lets a call start at most once, ever;
* exactly one ``function_call_output`` per ``call_id``, ever; a non-string result is
  JSON-encoded exactly once; an output that cannot be sent (bigger than one client event may
  be, docs/protocol.md §11) is replaced by an error output saying so, so that the one output
  reaches the server and the conversation a session mirrors is the server's;
* after ``response.done`` of a response that carried calls *and* the output of its last
  call, exactly one ``response.create`` (after those outputs, in command order).

Policy for a response that ends ``cancelled`` or ``failed`` (the user talked over it, or
it broke): its calls that have not started are *dropped*: they never run, and each gets
an output saying it was not run, because its ``function_call`` item is complete on the
server. Calls already running finish and their outputs are sent too. No
``response.create`` follows such a response: the user's new turn drives what comes next.
``completed`` and ``incomplete`` responses are followed up. A status of ``unknown`` (the
connection was lost before ``response.done``) decides nothing: calls keep running or
waiting and the session reports the real outcome later, e.g. ``completed`` once the
conversation is rebuilt on a new connection to have the model continue, or
``cancelled`` to let it go. When a ``function_call`` item is deleted
(:meth:`~CallTracker.on_item_deleted`) its call is *abandoned*: no output is sent for it.

Bounded memory (:meth:`~CallTracker.sizes`): a response is *retired* once it is over
(final status, every call answered, dropped or abandoned, follow-up decided) and
:meth:`~CallTracker.commands` has handed out all it owed. Nothing can then recur for its
calls: the server sends no ``…arguments.done`` after ``response.done``, and a rebuilt
conversation carries the calls as items with their outputs, which are not announced again.
Its call ids still move to a window of the last ``RETIRED_WINDOW`` (exported with the
state), so a stray duplicate ``…arguments.done`` is still refused rather than run twice.
A response whose status is ``unknown`` is never retired while it has calls.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from voxline.base.ordered import keep_newest
from voxline.realtime import events as ev
from voxline.realtime.errors import LocalProtocolError, ToolError

from .outputs import MAX_EVENT_BYTES, encode_output, error_output, unsendable

__all__ = ["RETIRED_WINDOW", "CallState", "CallTracker", "ToolCall"]

RETIRED_WINDOW = 128  # call ids of retired responses still refused as duplicates

_FOLLOW_UP = frozenset({"completed", "incomplete"})
_DROPPING = frozenset({"cancelled", "failed"})
_UNKNOWN = "unknown"


class CallState(enum.Enum):
    """Where a call is in its life."""

    PENDING = "pending"  # arguments complete; may be started
    RUNNING = "running"  # started; its result is awaited
    ANSWERED = "answered"  # its output is queued or sent
    DROPPED = "dropped"  # its response ended before it started; a "not run" output is queued or sent
    ABANDONED = "abandoned"  # its item was deleted; no output will be sent


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete function call from ``response.function_call_arguments.done``."""

    call_id: str
    name: str
    arguments: str
    response_id: str
    item_id: str


@dataclass(slots=True)
class _Call:
    call: ToolCall
    state: CallState


@dataclass(slots=True)
class _Response:
    status: str | None = None  # None until response.done
    call_ids: list[str] = field(default_factory=list)
    followed_up: bool = False


@dataclass(slots=True)
class _Command:
    payload: dict[str, Any]
    call_id: str | None  # None for response.create
    response_id: str


class _CallRow(BaseModel):
    call_id: str
    name: str
    arguments: str
    response_id: str
    item_id: str
    state: CallState


class _ResponseRow(BaseModel):
    response_id: str
    status: str | None
    followed_up: bool


class _CommandRow(BaseModel):
    command: dict[str, Any]
    call_id: str | None
    response_id: str


class _RetiredRow(BaseModel):
    call_id: str
    state: CallState


class _State(BaseModel):
    version: Literal[1]
    calls: list[_CallRow]
    responses: list[_ResponseRow]
    pending: list[_CommandRow]
    retired: list[_RetiredRow] = []


def _status_text(status: object) -> str:
    value = status.value if isinstance(status, enum.Enum) else status
    if value not in _FOLLOW_UP | _DROPPING | {_UNKNOWN}:
        raise ToolError(f"response status {value!r} is not a final status")
    return str(value)


class CallTracker:
    """Which calls exist, which may run, and which outputs and follow-ups to send."""

    def __init__(self) -> None:
        self._calls: dict[str, _Call] = {}
        self._by_item: dict[str, str] = {}
        self._responses: dict[str, _Response] = {}
        self._pending: list[_Command] = []
        self._retired: dict[str, CallState] = {}  # oldest first, at most RETIRED_WINDOW
        self._limit = MAX_EVENT_BYTES

    # -- server events ------------------------------------------------------------------

    def on_arguments_done(
        self, response_id: str, item_id: str, call_id: str, name: str, arguments: str
    ) -> list[ToolCall]:
        """``response.function_call_arguments.done``: the new runnable call, or nothing."""
        if call_id in self._calls or call_id in self._retired:
            return []
        call = ToolCall(call_id=call_id, name=name, arguments=arguments, response_id=response_id, item_id=item_id)
        response = self._responses.setdefault(response_id, _Response())
        response.call_ids.append(call_id)
        self._calls[call_id] = _Call(call, CallState.PENDING)
        self._by_item[item_id] = call_id
        if response.status in _DROPPING:
            self._drop(self._calls[call_id], response.status)
            return []
        return [call]

    def on_response_done(self, response_id: str, status: str | enum.Enum) -> list[ToolCall]:
        """``response.done``: returns the calls dropped because the response was cancelled or failed."""
        text = _status_text(status)
        response = self._responses.setdefault(response_id, _Response())
        if response.status not in (None, _UNKNOWN):
            return []
        response.status = text
        dropped: list[ToolCall] = []
        if text in _DROPPING:
            for call_id in response.call_ids:
                record = self._calls[call_id]
                if record.state is CallState.PENDING:
                    self._drop(record, text)
                    dropped.append(record.call)
        self._follow_up(response_id)
        return dropped

    def has_calls(self, response_id: str) -> bool:
        """Did the response make calls (that the tracker still holds)?"""
        response = self._responses.get(response_id)
        return response is not None and bool(response.call_ids)

    def withhold_follow_up(self, response_id: str) -> None:
        """No ``response.create`` after this response's calls: their outputs still go when answered."""
        self._responses.setdefault(response_id, _Response()).followed_up = True

    def on_item_deleted(self, item_id: str) -> list[ToolCall]:
        """``conversation.item.deleted`` of a ``function_call`` item: abandon its call."""
        call_id = self._by_item.get(item_id)
        record = self._calls.get(call_id) if call_id is not None else None
        if record is None or record.state is CallState.ABANDONED:
            return []
        if record.state in (CallState.ANSWERED, CallState.DROPPED):
            if not self._unqueue(lambda c: c.call_id == record.call.call_id):
                return []  # its output has already been handed over
        record.state = CallState.ABANDONED
        rid = record.call.response_id
        if not any(self._calls[c].state is CallState.ANSWERED for c in self._responses[rid].call_ids):
            if self._unqueue(lambda c: c.call_id is None and c.response_id == rid):
                self._responses[rid].followed_up = False
        self._follow_up(rid)
        return [record.call]

    # -- the runner's side --------------------------------------------------------------

    def begin(self, call_id: str) -> bool:
        """Claim a pending call to start it now; ``False`` if it must not run (any more)."""
        if call_id in self._retired:
            return False
        record = self._record(call_id)
        if record.state is not CallState.PENDING:
            return False
        record.state = CallState.RUNNING
        return True

    def on_result(self, call_id: str, output: object) -> str | None:
        """The call's result (any value; strings are sent verbatim). Later results are ignored.

        Returns the output queued, which is an error output if the result cannot be sent, or
        ``None`` if the result was ignored.
        """
        if call_id in self._retired:
            return None
        record = self._record(call_id)
        if record.state not in (CallState.PENDING, CallState.RUNNING):
            return None
        text = encode_output(output)
        refusal = unsendable(call_id, record.call.name, text, self._limit)
        if refusal is not None:
            text = error_output(refusal)
        record.state = CallState.ANSWERED
        self._queue_output(record.call, text)
        self._follow_up(record.call.response_id)
        return text

    def commands(self) -> list[ev.ClientEvent]:
        """Client events to send now, in order (outputs, then the follow-up); each is handed out once."""
        out = [ev.parse_client_dict(c.payload) for c in self._pending]
        self._pending.clear()
        self._retire()
        return out

    # -- queries ------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        """The largest event the session's connection carries: a bigger output is sent as an error output."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        """A new connection's limit: outputs queued while away that it cannot carry become error outputs."""
        self._limit = value
        for command in self._pending:
            item = command.payload.get("item")
            if command.call_id is None or not isinstance(item, dict):
                continue
            record = self._calls.get(command.call_id)
            name = record.call.name if record is not None else "the tool"
            refusal = unsendable(command.call_id, name, str(item.get("output", "")), value)
            if refusal is not None:
                command.payload["item"] = {**item, "output": error_output(refusal)}

    def call(self, call_id: str) -> ToolCall | None:
        """The call ``call_id`` names, while the tracker holds it."""
        record = self._calls.get(call_id)
        return record.call if record is not None else None

    def state(self, call_id: str) -> CallState | None:
        """The state of ``call_id``, or ``None`` if it was never seen."""
        record = self._calls.get(call_id)
        return record.state if record is not None else self._retired.get(call_id)

    def runnable(self) -> list[ToolCall]:
        """Calls that may still be started, in arrival order (e.g. after :meth:`from_state`)."""
        return [r.call for r in self._calls.values() if r.state is CallState.PENDING]

    def unsettled_responses(self) -> list[str]:
        """Responses with calls whose ``response.done`` never came (the connection was lost first)."""
        return [rid for rid, r in self._responses.items() if r.call_ids and r.status in (None, _UNKNOWN)]

    def follow_ups_owed(self) -> list[str]:
        """Responses done whose calls are still being run: their ``response.create`` comes with the outputs."""
        return [rid for rid, r in self._responses.items()
                if r.call_ids and r.status in _FOLLOW_UP and not r.followed_up
                and any(self._calls[c].state in (CallState.PENDING, CallState.RUNNING) for c in r.call_ids)]

    def unfinished_items(self) -> frozenset[str]:
        """The items of calls whose output has not gone yet (to be run, running, or queued): a conversation rebuilt on
        a new connection must hold them, or the output sent later has no call."""
        queued = {command.call_id for command in self._pending if command.call_id is not None}
        return frozenset(record.call.item_id for record in self._calls.values()
                         if record.state in (CallState.PENDING, CallState.RUNNING) or record.call.call_id in queued)

    def running(self) -> list[ToolCall]:
        """Calls that started and whose result has not arrived."""
        return [r.call for r in self._calls.values() if r.state is CallState.RUNNING]

    def sizes(self) -> dict[str, int]:
        """Entries per table, to check that memory stays bounded."""
        return {
            "calls": len(self._calls),
            "items": len(self._by_item),
            "responses": len(self._responses),
            "pending": len(self._pending),
            "retired": len(self._retired),
        }

    # -- persistence --------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """A JSON-able snapshot, including commands not yet handed out."""
        state = _State(
            version=1,
            calls=[_CallRow(**asdict(r.call), state=r.state) for r in self._calls.values()],
            responses=[
                _ResponseRow(response_id=rid, status=r.status, followed_up=r.followed_up)
                for rid, r in self._responses.items()
            ],
            pending=[_CommandRow(command=c.payload, call_id=c.call_id, response_id=c.response_id) for c in self._pending],
            retired=[_RetiredRow(call_id=call_id, state=s) for call_id, s in self._retired.items()],
        )
        return state.model_dump(mode="json")

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> CallTracker:
        """A tracker continuing from :meth:`export_state`; :class:`ToolError` if malformed."""
        try:
            parsed = _State.model_validate(state)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise ToolError(f"invalid call tracker state at {first['loc']}: {first['msg']}") from None
        tracker = cls()
        for row in parsed.responses:
            tracker._responses[row.response_id] = _Response(status=row.status, followed_up=row.followed_up)
        for call_row in parsed.calls:
            call = ToolCall(**call_row.model_dump(exclude={"state"}))
            tracker._calls[call.call_id] = _Call(call, call_row.state)
            tracker._by_item[call.item_id] = call.call_id
            tracker._responses.setdefault(call.response_id, _Response()).call_ids.append(call.call_id)
        for k, pending in enumerate(parsed.pending):  # sent as they are: one that is no client event stops all
            try:
                ev.parse_client_dict(pending.command)
            except LocalProtocolError as exc:
                raise ToolError(f"invalid call tracker state at ('pending', {k}, 'command'): {exc}") from None
        tracker._pending = [_Command(dict(r.command), r.call_id, r.response_id) for r in parsed.pending]
        for retired in parsed.retired[-RETIRED_WINDOW:]:
            tracker._retired[retired.call_id] = retired.state
        return tracker

    # -- internals ----------------------------------------------------------------------

    def _record(self, call_id: str) -> _Call:
        record = self._calls.get(call_id)
        if record is None:
            raise ToolError(f"unknown call_id {call_id!r}")
        return record

    def _retire(self) -> None:
        """Move every response that is over, and owes nothing, out of the live tables."""
        owing = {c.response_id for c in self._pending}
        for rid, response in list(self._responses.items()):
            if rid in owing or response.status is None or (response.status == _UNKNOWN and response.call_ids):
                continue
            states = [self._calls[c].state for c in response.call_ids]
            if any(s in (CallState.PENDING, CallState.RUNNING) for s in states):
                continue
            for call_id in response.call_ids:
                record = self._calls.pop(call_id)
                self._by_item.pop(record.call.item_id, None)
                self._retired[call_id] = record.state
                keep_newest(self._retired, RETIRED_WINDOW)
            del self._responses[rid]

    def _drop(self, record: _Call, status: str) -> None:
        record.state = CallState.DROPPED
        message = f"{record.call.name} was not run: the response was {status} before it started"
        self._queue_output(record.call, error_output(message))

    def _queue_output(self, call: ToolCall, text: str) -> None:
        item = {"type": "function_call_output", "call_id": call.call_id, "output": text}
        payload = {"type": "conversation.item.create", "item": item}
        self._pending.append(_Command(payload, call.call_id, call.response_id))

    def _unqueue(self, match: Callable[[_Command], bool]) -> bool:
        kept = [c for c in self._pending if not match(c)]
        removed = len(kept) != len(self._pending)
        self._pending = kept
        return removed

    def _follow_up(self, response_id: str) -> None:
        """Queue the one ``response.create`` once the response is done and every call answered."""
        response = self._responses[response_id]
        if response.followed_up or response.status not in _FOLLOW_UP:
            return
        states = [self._calls[c].state for c in response.call_ids]
        if any(s in (CallState.PENDING, CallState.RUNNING) for s in states):
            return
        if CallState.ANSWERED not in states:
            return
        response.followed_up = True
        self._pending.append(_Command({"type": "response.create"}, None, response_id))

