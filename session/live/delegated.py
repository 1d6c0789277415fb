"""Function calls of the Responses model a GPT-Live session delegates to, through the Realtime session's tracker.

With ``delegation.type = "responses"`` the Live model hands tasks to a Responses model; its stream
arrives as ``response.event`` envelopes (docs/protocol.md §14). A completed ``function_call`` item
(``response.output_item.done``) is the client's to run: it goes to the same
:class:`~voxline.session.tools.calls.CallTracker` as a Realtime call, so it runs once per
``call_id``, ever, and its one output and the one follow-up come back from
:meth:`~CallTracker.commands`, translated here to ``response.item.create`` and ``response.create``.
A response is known by the id its ``response.created`` gave, per delegation.
"""

from __future__ import annotations

from voxline.realtime import events as ev
from voxline.realtime.live import events as lv

from ..tools.calls import CallTracker, ToolCall

__all__ = ["DelegatedCalls"]

_FINAL = {"response.completed": "completed", "response.incomplete": "incomplete",
          "response.failed": "failed", "response.cancelled": "cancelled"}


class DelegatedCalls:
    def __init__(self, tracker: CallTracker) -> None:
        self.tracker = tracker
        self._responses: dict[str, str] = {}  # delegation → its Responses response id

    def see(self, output: lv.LiveResponseEvent) -> tuple[ToolCall, ...]:
        """One envelope: the calls that became runnable (none twice)."""
        inner = output.event
        kind = inner.get("type")
        key = output.delegation_id or "live"
        response = inner.get("response")
        if kind == "response.created" and isinstance(response, dict) and isinstance(response.get("id"), str):
            self._responses[key] = response["id"]
            return ()
        rid = self._responses.get(key, key)
        if kind == "response.output_item.done":
            item = inner.get("item")
            if (isinstance(item, dict) and item.get("type") == "function_call" and item.get("status") == "completed"
                    and isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str)):
                arguments = item["arguments"] if isinstance(item.get("arguments"), str) else "{}"
                return tuple(self.tracker.on_arguments_done(rid, str(item.get("id") or item["call_id"]),
                                                            item["call_id"], item["name"], arguments))
        elif isinstance(kind, str) and kind in _FINAL:
            self.tracker.on_response_done(rid, _FINAL[kind])
        return ()

    def commands(self) -> list[lv.LiveClientEvent]:
        """The outputs and follow-ups the tracker owes, as Live client events."""
        out: list[lv.LiveClientEvent] = []
        for command in self.tracker.commands():
            match command:
                case ev.ConversationItemCreate(item=ev.FunctionCallOutputItem() as item):
                    out.append(lv.LiveResponseItemCreate(
                        item={"type": "function_call_output", "call_id": item.call_id, "output": item.output}))
                case ev.ResponseCreate():
                    out.append(lv.LiveResponseCreate())
                case _:
                    pass
        return out
