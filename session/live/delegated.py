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
(``session.thinking.append``), and the old response's follow-up is not sent. So is an output the
lost session may never have used: the response that reads it, the one its follow-up makes (the
delegation's next), had not ended.
"""

from __future__ import annotations

from voxline.realtime import events as ev
from voxline.base.shown import clip
from voxline.base.ordered import keep_newest
from voxline.realtime.errors import LocalProtocolError
from voxline.realtime.frames import frame_bytes
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveProtocol

from ..events import SessionError
from ..tools.calls import CallTracker, ToolCall
from ..tools.rounds import ToolRounds
from ..tools.outputs import error_output

__all__ = ["DELEGATIONS", "NAMES", "NAME_CHARS", "OUTPUT_CHARS", "DelegatedCalls", "result_note"]

NAMES = 1024  # tool names kept for calls whose output has not gone yet
DELEGATIONS = 1024  # delegations whose latest response is remembered, the newest
_SPARE = 256  # the event_id added on the way out, and room to spare
NAME_CHARS = 64
OUTPUT_CHARS = 1500  # of a result told as context (an append takes at most 500 tokens)

_FINAL = {"response.completed": "completed", "response.incomplete": "incomplete",
          "response.failed": "failed", "response.cancelled": "cancelled"}


def result_note(name: str, output: str) -> str:
    """What a session is told of a tool's result whose call an earlier session made."""
    shown = clip(output, OUTPUT_CHARS)  # a key the cut would halve is redacted whole first
    if len(output) > OUTPUT_CHARS and shown.endswith("…"):  # cut, not merely shortened by its redaction
        shown += " (cut short)"
    name = clip(name, NAME_CHARS + 1)  # the server named it: any length
    return (f"Tool result: the task '{name}' that an earlier part of this conversation asked for finished after the "
            f"connection was lost. Its result: {shown}")


class DelegatedCalls:
    """The Live session's delegated calls over the session's one tracker (see the module docstring)."""

    def __init__(self, tracker: CallTracker, rounds: ToolRounds) -> None:
        self.tracker = tracker
        self.rounds = rounds
        self.withheld: list[SessionError] = []  # follow-ups past ``max_tool_rounds``, for the machine to say
        self._responses: dict[str, str] = {}  # delegation → its Responses response id (the newest DELEGATIONS)
        self._orphans: dict[str, str] = {}  # call id → tool name: calls of a session the connection to was lost
        self._held: list[ev.ClientEvent] = []  # what was owed to that session when it was lost
        self._names: dict[str, tuple[str, str]] = {}  # call id → (tool name, its response), until its output is sent
        # (the newest NAMES)
        # call id → (what ends its wait, name, output): sent, and not yet known to be used. An output is read by
        # the response its follow-up makes, the delegation's next one: sent while its own response was still going,
        # it waits for that one's end first, then for the next's
        self._sent: dict[str, tuple[tuple[str, str], str, str]] = {}
        self._ended: dict[str, str] = {}  # response id → its delegation: responses over (the newest NAMES)

    def see(self, output: lv.LiveResponseEvent) -> tuple[ToolCall, ...]:
        """One envelope: the calls that became runnable (none twice)."""
        inner = output.event
        kind = inner.get("type")
        key = output.delegation_id or "live"
        response = inner.get("response")
        if kind == "response.created" and isinstance(response, dict) and isinstance(response.get("id"), str):
            self._responses.pop(key, None)  # the newest last: a delegation going on is never the oldest let go
            self._responses[key] = response["id"]
            keep_newest(self._responses, DELEGATIONS)  # one a delegation: a Live session of days makes thousands
            return ()
        rid = self._responses.get(key, key)
        if kind == "response.output_item.done":
            item = inner.get("item")
            if (isinstance(item, dict) and item.get("type") == "function_call" and item.get("status") == "completed"
                    and isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str)):
                arguments = item["arguments"] if isinstance(item.get("arguments"), str) else "{}"
                self._names[item["call_id"]] = (item["name"], rid)
                keep_newest(self._names, NAMES)
                return tuple(self.tracker.on_arguments_done(rid, str(item.get("id") or item["call_id"]),
                                                            item["call_id"], item["name"], arguments))
        elif isinstance(kind, str) and kind in _FINAL:
            if self.tracker.has_calls(rid) and (over := self.rounds.over(rid)) is not None:
                self.tracker.withhold_follow_up(rid)
                self.withheld.append(over)
            self.tracker.on_response_done(rid, _FINAL[kind])
            self._ended[rid] = key
            keep_newest(self._ended, NAMES)
            for call_id in [c for c, (waits, _n, _o) in self._sent.items() if waits == ("after", key)]:
                del self._sent[call_id]  # the follow-up that took it ended: the session went on from it
            for call_id, (waits, name, out) in list(self._sent.items()):
                if waits == ("response", rid):  # its own response never reads it: the follow-up now going does
                    self._sent[call_id] = (("after", key), name, out)
        return ()

    @property
    def orphans(self) -> int:
        """Calls of a lost session whose result has not been told yet."""
        return len(self._orphans)

    @property
    def named(self) -> int:
        """Tool names kept for calls whose output has not gone yet, and outputs sent whose response is not over."""
        return len(self._names) + len(self._sent)

    @property
    def delegations(self) -> int:
        """Delegations whose latest response is remembered (at most :data:`DELEGATIONS`)."""
        return len(self._responses)

    def connection_lost(self) -> None:
        """The session is gone: its calls not yet answered on it are told to the next one as context."""
        for call in (*self.tracker.running(), *self.tracker.runnable()):
            self._orphans.setdefault(call.call_id, self._names.get(call.call_id, (call.name, ""))[0])
        for rid in self.tracker.unsettled_responses():  # they never end now: their calls may be let go once answered
            self.tracker.on_response_done(rid, "incomplete")
        for call_id, (_rid, name, output) in self._sent.items():  # sent, and the lost session may not have used it
            self._orphans.setdefault(call_id, name)
            self._held.append(ev.parse_client_dict({"type": "conversation.item.create", "item": {
                "type": "function_call_output", "call_id": call_id, "output": output}}))
        self._sent.clear()
        self._ended.clear()  # the next session's responses are its own
        pending = self.tracker.commands()  # outputs not sent yet; the follow-ups were the lost session's
        for command in pending:
            if isinstance(command, ev.ConversationItemCreate) and isinstance(command.item, ev.FunctionCallOutputItem):
                self._orphans.setdefault(command.item.call_id, self._names.get(command.item.call_id, ("a tool", ""))[0])
                self._held.append(command)
        self._responses.clear()

    def _fitted(self, item: ev.FunctionCallOutputItem) -> str:
        """The output, or an error output if its event would be larger than the connection carries (as sent:
        non-ASCII characters escaped)."""
        size = frame_bytes({"type": "response.item.create", "item": {
            "type": "function_call_output", "call_id": item.call_id, "output": item.output}}, ascii_only=True)
        if size + _SPARE <= self.tracker.limit:
            return item.output
        return error_output(f"the output is too large to send: {size} bytes as sent, and one event on this "
                            f"connection carries at most {self.tracker.limit} bytes")

    def commands(self) -> list[lv.LiveClientEvent]:
        """The outputs and follow-ups the tracker owes, as Live client events (see the module docstring)."""
        out: list[lv.LiveClientEvent] = []
        batch, self._held = [*self._held, *self.tracker.commands()], []
        outputs = orphaned = 0  # since the last follow-up
        for command in batch:
            match command:
                case ev.ConversationItemCreate(item=ev.FunctionCallOutputItem() as item):
                    outputs += 1
                    named = self._names.pop(item.call_id, None)
                    name = self._orphans.pop(item.call_id, None)
                    if name is not None:
                        orphaned += 1
                        out.append(lv.LiveThinkingAppend(content=result_note(name, item.output)))
                    else:
                        fitted = self._fitted(item)
                        out.append(lv.LiveResponseItemCreate(item={
                            "type": "function_call_output", "call_id": item.call_id, "output": fitted}))
                        if named is not None:
                            name, rid = named
                            over = self._ended.get(rid)
                            waits = ("response", rid) if over is None else ("after", over)
                            self._sent[item.call_id] = (waits, name, fitted)
                            keep_newest(self._sent, NAMES)
                case ev.ResponseCreate():
                    if not outputs or orphaned < outputs:  # not the follow-up of a lost session's response
                        out.append(lv.LiveResponseCreate())
                    outputs = orphaned = 0
                case _:
                    pass
        return out

    def send(self, protocol: LiveProtocol) -> bool:
        """The outputs and follow-ups owed (:meth:`commands`), sent on ``protocol``; whether any were owed."""
        commands = self.commands()
        for command in commands:
            try:
                protocol.send(command)
            except LocalProtocolError:  # larger than the connection carries even as an error output: not sent
                continue
        return bool(commands)
