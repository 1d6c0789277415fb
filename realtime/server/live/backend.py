"""The stand-in's Responses backend, for sessions with ``delegation.type = "responses"``.

The service runs a Responses model when the Live model delegates; the stand-in plays one from
the scenario. A scripted turn's calls become one delegation: ``session.delegation.created``
(target ``responses``), then the backend's stream wrapped in ``response.event``:
``response.created``, each call as ``response.output_item.added`` / ``.done`` (a completed
``function_call``), ``response.completed``. The app runs the tools, answers each call with
``response.item.create`` (a ``function_call_output``) and continues with ``response.create``;
the continuation is a response whose message is the turn's ``after`` reply, which the stand-in
then speaks. A ``response.create`` that leaves a call unanswered is refused
(``function_call_outputs_required``, as the service does). Lifecycle snapshots carry no output
and no usage beyond zero tokens: the stand-in spends none.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.scenario import Call, Output, Say

__all__ = ["ResponsesBackend"]

Make = Callable[..., dict[str, Any]]
"""Builds a server event: ``make(type, client_event_id, **fields)``."""


def outputs_required(missing: list[str]) -> ErrorSpec:
    return ErrorSpec(f"Send a function_call_output for every pending call first (missing: {', '.join(missing)[:200]}).",
                     "function_call_outputs_required", None)


@dataclass
class _Delegation:
    delegation_id: str
    calls: list[str]
    then: deque[Output]
    answered: dict[str, str] = field(default_factory=dict)


class ResponsesBackend:
    """Scripted calls out as Responses events, their outputs in, the scripted answer back."""

    def __init__(self, ids: IdFactory, model: str, wall_time: float) -> None:
        self._ids = ids
        self._model = model
        self._created_at = int(wall_time)
        self._sequence = 0
        self._open: list[_Delegation] = []

    @property
    def pending(self) -> bool:
        return bool(self._open)

    def delegate(self, calls: list[Call], then: deque[Output], offset_ms: int, make: Make) -> list[dict[str, Any]]:
        """A delegation of ``calls``; ``then`` is what the stand-in says once they are answered."""
        delegation_id = self._ids.new("deleg")
        response_id = self._ids.new("resp")
        delegation = {"id": delegation_id, "target": "responses", "type": "delegation", "response_id": response_id}
        events = [make("session.delegation.created", None, delegation=delegation, offset_ms=offset_ms)]
        items = [self._call_item(call) for call in calls]
        events += self._stream(make, delegation_id, response_id, items)
        self._open.append(_Delegation(delegation_id, [item["call_id"] for item in items], then))
        return events

    def item_create(self, item: dict[str, Any]) -> None:
        """``response.item.create``: a tool's output (other items are taken and ignored)."""
        if item.get("type") != "function_call_output":
            return
        call_id, output = item.get("call_id"), item.get("output")
        if not isinstance(call_id, str) or not isinstance(output, (str, list)):
            raise RequestRejected(errors.invalid_value("item", "A function_call_output needs a call_id and an output."))
        for delegation in self._open:
            if call_id in delegation.calls:
                delegation.answered[call_id] = output if isinstance(output, str) else json.dumps(output)
                return
        raise RequestRejected(errors.invalid_value("item.call_id", f"No pending function call '{call_id[:80]}'."))

    def respond(self, make: Make, client_event_id: str | None) -> tuple[list[dict[str, Any]], deque[Output]]:
        """``response.create``: continue the oldest delegation (every call answered) with its scripted answer."""
        if not self._open:
            return [], deque()
        delegation = self._open[0]
        missing = [c for c in delegation.calls if c not in delegation.answered]
        if missing:
            raise RequestRejected(outputs_required(missing))
        self._open.pop(0)
        text = " ".join(o.text for o in delegation.then if isinstance(o, Say))
        items = [self._message_item(text)] if text else []
        events = self._stream(make, delegation.delegation_id, self._ids.new("resp"), items, client_event_id)
        return events, delegation.then

    # The nested stream.

    def _stream(self, make: Make, delegation_id: str, response_id: str, items: list[dict[str, Any]],
                client_event_id: str | None = None) -> list[dict[str, Any]]:
        nested: list[dict[str, Any]] = [{"type": "response.created", "response": self._response(response_id, "in_progress")}]
        for index, item in enumerate(items):
            nested.append({"type": "response.output_item.added", "output_index": index, "item": {**item, "status": "in_progress"}})
            nested.append({"type": "response.output_item.done", "output_index": index, "item": item})
        nested.append({"type": "response.completed", "response": self._response(response_id, "completed")})
        events = []
        for event in nested:
            event["sequence_number"] = self._sequence
            self._sequence += 1
            events.append(make("response.event", client_event_id, delegation_id=delegation_id, event=event))
        return events

    def _response(self, response_id: str, status: str) -> dict[str, Any]:
        response: dict[str, Any] = {
            "id": response_id, "object": "response", "created_at": self._created_at, "model": self._model,
            "status": status, "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        }
        if status == "completed":
            response["usage"] = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                                 "output_tokens": 0,
                                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
        return response

    def _call_item(self, call: Call) -> dict[str, Any]:
        return {"type": "function_call", "id": self._ids.new("fc"), "call_id": self._ids.new("call"),
                "name": call.name, "arguments": call.arguments, "status": "completed"}

    def _message_item(self, text: str) -> dict[str, Any]:
        return {"type": "message", "id": self._ids.new("msg"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
