"""Function calls of the Responses model a GPT-Live session delegates to, through the Realtime session's tracker.

With ``delegation.type = "responses"`` the Live model hands tasks to a Responses model; its stream
arrives as ``response.event`` envelopes (docs/protocol.md §14). A completed ``function_call`` item
(``response.output_item.done``) is the client's to run: it goes to the same
:class:`~voxline.session.tools.calls.CallTracker` as a Realtime call, so it runs once per
``call_id``, ever, and its one output and the one follow-up come back from
:meth:`~CallTracker.commands`, translated here to ``response.item.create`` and ``response.create``.
A response is known by the id its ``response.created`` gave, per delegation.

Nothing of a delegation survives a drop: the next session (a fork or a new one) never made the
call, and would refuse its output. A call still running at the drop, or whose output was not sent
yet, still runs once; its result is told to the next session as silent context
(``session.thinking.append``), and the old response's follow-up is not sent.
"""

from __future__ import annotations

from voxline.realtime import events as ev
from voxline.realtime.live import events as lv

from ..tools.calls import CallTracker, ToolCall

__all__ = ["OUTPUT_CHARS", "DelegatedCalls", "result_note"]

OUTPUT_CHARS = 1500  # of a result told as context (an append takes at most 500 tokens)

_FINAL = {"response.completed": "completed", "response.incomplete": "incomplete",
          "response.failed": "failed", "response.cancelled": "cancelled"}


def result_note(name: str, output: str) -> str:
    """What a session is told of a tool's result whose call an earlier session made."""
    shown = output if len(output) <= OUTPUT_CHARS else output[:OUTPUT_CHARS] + " … (cut short)"
    return (f"Tool result: the task '{name}' that an earlier part of this conversation asked for finished after the "
            f"connection was lost. Its result: {shown}")


class DelegatedCalls:
    def __init__(self, tracker: CallTracker) -> None:
        self.tracker = tracker
        self._responses: dict[str, str] = {}  # delegation → its Responses response id
        self._orphans: dict[str, str] = {}  # call id → tool name: calls of a session the connection to was lost
        self._held: list[ev.ClientEvent] = []  # what was owed to that session when it was lost

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

    @property
    def orphans(self) -> int:
        """Calls of a lost session whose result has not been told yet."""
        return len(self._orphans)

    def connection_lost(self) -> None:
        """The session is gone: its calls not yet answered on it are told to the next one as context."""
        self._held.extend(c for c in self.tracker.commands() if not isinstance(c, ev.ResponseCreate))  # unsent outputs
        owed = [*self.tracker.running(), *self.tracker.runnable()]
        for command in self._held:
            if isinstance(command, ev.ConversationItemCreate) and isinstance(command.item, ev.FunctionCallOutputItem):
                call = self.tracker.call(command.item.call_id)
                self._orphans[command.item.call_id] = call.name if call is not None else "unknown"
        self._orphans.update((call.call_id, call.name) for call in owed)
        self._responses.clear()

    def commands(self) -> list[lv.LiveClientEvent]:
        """The outputs and follow-ups the tracker owes, as Live client events (see the module docstring)."""
        out: list[lv.LiveClientEvent] = []
        batch, self._held = [*self._held, *self.tracker.commands()], []
        outputs = orphaned = 0  # since the last follow-up
        for command in batch:
            match command:
                case ev.ConversationItemCreate(item=ev.FunctionCallOutputItem() as item):
                    outputs += 1
                    name = self._orphans.pop(item.call_id, None)
                    if name is not None:
                        orphaned += 1
                        out.append(lv.LiveThinkingAppend(content=result_note(name, item.output)))
                    else:
                        out.append(lv.LiveResponseItemCreate(
                            item={"type": "function_call_output", "call_id": item.call_id, "output": item.output}))
                case ev.ResponseCreate():
                    if not outputs or orphaned < outputs:  # not the follow-up of a lost session's response
                        out.append(lv.LiveResponseCreate())
                    outputs = orphaned = 0
                case _:
                    pass
        return out
