"""A conversation of days across a reconnect: the newest items go to the new connection, the rest are forgotten."""

from __future__ import annotations

import json

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.events import ConnectionRestored
from voxline.session.machine import SessionMachine
from voxline.session.report.lines import EventLines
from voxline.session.settings import SessionSettings


def _said(machine: SessionMachine, protocol: RealtimeProtocol, count: int) -> None:
    """``count`` typed messages, each echoed into the server's conversation."""
    previous = None
    for n in range(count):
        item = {"id": f"item_{n:05d}", "object": "realtime.item", "type": "message", "role": "user",
                "status": "completed", "content": [{"type": "input_text", "text": f"message {n}"}]}
        protocol.receive(json.dumps({"type": "conversation.item.added", "event_id": f"e{n}",
                                     "previous_item_id": previous, "item": item}))
        for output in protocol.events():
            machine.receive(output, 0.0)
        previous = item["id"]


def test_a_reconnect_gives_the_new_connection_the_newest_items_and_says_how_many_were_left_out() -> None:
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none", rebuild_items=100), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    _said(machine, protocol, 1000)
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(1.5)
    created = [json.loads(t) for t in fresh.data_to_send()]
    assert [e["item"]["id"] for e in created] == [f"item_{n:05d}" for n in range(900, 1000)]
    assert created[0]["previous_item_id"] == "root"
    assert (restored.replayed_items, restored.older_items) == (100, 900)
    assert len(machine.mirror) == 100  # the older ones are forgotten
    line = EventLines().line(ConnectionRestored(1.5, 100, older_items=900))
    assert line == "connection restored (100 conversation items sent again; the 900 oldest items left out)"


def _feed(machine: SessionMachine, protocol: RealtimeProtocol, *events: dict[str, object]) -> list[str]:
    calls: list[str] = []
    for n, event in enumerate(events):
        protocol.receive(json.dumps({"event_id": f"ev{n}", **event}))
        for output in protocol.events():
            calls += [call.call_id for call in machine.receive(output, 0.0).calls]
    return calls


def _user(item_id: str, previous: str | None) -> dict[str, object]:
    return {"type": "conversation.item.added", "previous_item_id": previous, "item": {
        "id": item_id, "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
        "content": [{"type": "input_text", "text": f"text {item_id}"}]}}


def _a_tool_runs_while_the_user_types(keep: int, typed: int) -> tuple[SessionMachine, RealtimeProtocol]:
    """A call made, started, and ``typed`` messages after it while it runs."""
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none", rebuild_items=keep), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    _feed(machine, protocol, _user("u0", None))
    call = {"id": "fc1", "object": "realtime.item", "type": "function_call", "status": "completed",
            "call_id": "call_1", "name": "lookup", "arguments": "{}"}
    response = {"id": "r1", "object": "realtime.response", "status": "in_progress", "output": []}
    started = _feed(machine, protocol, {"type": "response.created", "response": response},
                    {"type": "conversation.item.added", "previous_item_id": "u0", "item": call},
                    {"type": "response.function_call_arguments.done", "response_id": "r1", "item_id": "fc1",
                     "output_index": 0, "call_id": "call_1", "name": "lookup", "arguments": "{}"},
                    {"type": "response.done", "response": {**response, "status": "completed", "output": [call]}})
    assert started == ["call_1"] and machine.calls.begin("call_1")
    previous = "fc1"
    for n in range(typed):
        _feed(machine, protocol, _user(f"m{n:05d}", previous))
        previous = f"m{n:05d}"
    protocol.data_to_send()
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    return machine, protocol


def _sent_after_the_result(machine: SessionMachine) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    machine.restore(1.5)
    rebuilt = [json.loads(t) for t in fresh.data_to_send()]
    machine.calls.on_result("call_1", {"answer": 42})
    machine.drain_tools()
    return rebuilt, [json.loads(t) for t in fresh.data_to_send()]


def test_a_call_still_running_is_rebuilt_however_far_back_and_its_output_finds_it() -> None:
    """The window cut by count left out a call still running: its output went to a connection without the call
    (the service refuses it, and the follow-up answered without the result)."""
    machine, _ = _a_tool_runs_while_the_user_types(keep=2, typed=5)
    rebuilt, after = _sent_after_the_result(machine)
    assert [c["item"]["id"] for c in rebuilt] == ["fc1", "m00000", "m00001", "m00002", "m00003", "m00004"]
    assert [(e["type"], e.get("item", {}).get("call_id")) for e in after] == [
        ("conversation.item.create", "call_1"), ("response.create", None)]


def test_a_call_the_conversation_let_go_of_is_abandoned_not_answered_into_nothing() -> None:
    """Past the mirror's bound within one connection the running call's item is gone: no output for it goes."""
    from voxline.session.mirror.order import MAX_ITEMS
    from voxline.session.tools.calls import CallState

    machine, _ = _a_tool_runs_while_the_user_types(keep=MAX_ITEMS, typed=MAX_ITEMS)
    rebuilt, after = _sent_after_the_result(machine)
    assert "fc1" not in {c["item"]["id"] for c in rebuilt}
    assert machine.calls.state("call_1") is CallState.ABANDONED and after == []


def test_an_output_in_the_window_brings_its_call_and_forgotten_items_leave_no_pending_delete() -> None:
    from voxline.session.mirror import ConversationMirror
    from voxline.realtime.events import parse_server_event

    def added(item: dict[str, object], previous: str | None) -> object:
        return parse_server_event(json.dumps({"type": "conversation.item.added", "event_id": "e",
                                              "previous_item_id": previous, "item": item}))

    mirror = ConversationMirror()
    mirror.apply(added({"id": "a0", "object": "realtime.item", "type": "message", "role": "assistant",
                        "status": "completed", "content": [{"type": "output_text", "text": "hi"}]}, None))
    mirror._pending_deletes["a0"] = None  # as a barge-in records an unheard item's delete
    mirror.apply(added({"id": "fc", "object": "realtime.item", "type": "function_call", "status": "completed",
                        "call_id": "c1", "name": "f", "arguments": "{}"}, "a0"))
    mirror.apply(added({"id": "out", "object": "realtime.item", "type": "function_call_output", "call_id": "c1",
                        "output": "1"}, "fc"))
    plan = mirror.plan_rebuild(keep=1)
    assert plan.item_ids == ("fc", "out") and plan.older == 1 and plan.skipped == ()
    mirror.adopt_rebuild(plan)
    assert mirror.pending_deletes == () and mirror.to_json()["pending_deletes"] == []
    mirror.apply(added({"id": "a0", "object": "realtime.item", "type": "message", "role": "assistant",
                        "status": "completed", "content": [{"type": "output_text", "text": "hi"}]}, None))
    assert [item.id for item in mirror.items()] == ["fc", "out"]  # a late word about it does not bring it back


def test_an_output_queued_while_the_connection_was_down_finds_its_call_on_the_next() -> None:
    machine, _ = _a_tool_runs_while_the_user_types(keep=2, typed=5)
    machine.calls.on_result("call_1", {"answer": 42})  # the tool returned while away: its output waits
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    machine.restore(1.5)
    sent = [json.loads(t) for t in fresh.data_to_send()]
    created = [e["item"] for e in sent if e["type"] == "conversation.item.create"]
    assert created[0]["id"] == "fc1" and created[-1] == {**created[-1], "type": "function_call_output",
                                                         "call_id": "call_1"}


def test_a_window_that_reaches_back_to_a_call_reaches_back_to_its_own_outputs_calls_too() -> None:
    """Calls and outputs interleaved (fc0 fc1 o0 fc2 o1 ...): each call brought in brings an output whose call is
    further back, down to the first."""
    from voxline.session.mirror.rebuild import plan_rebuild
    from voxline.session.mirror.records import MirrorItem

    def call(n: int) -> MirrorItem:
        return MirrorItem(id=f"fc{n}", kind="function_call", item_type="function_call", status="completed",
                          call_id=f"c{n}", name="f", arguments="{}", arguments_done=True)

    def output(n: int) -> MirrorItem:
        return MirrorItem(id=f"o{n}", kind="function_call_output", item_type="function_call_output",
                          call_id=f"c{n}", output="1")

    items = [call(0)] + [x for n in range(1, 2000) for x in (call(n), output(n - 1))] + [output(1999)]
    plan = plan_rebuild(items, keep=1)
    assert plan.older == 0 and plan.skipped == () and len(plan.item_ids) == len(items)
    plan = plan_rebuild(items + [call(5000)], keep=1)  # a call with no output yet needs nothing before it
    assert plan.older == len(items) and plan.item_ids == ("fc5000",)


def test_a_saved_mirror_past_the_bound_is_read_back_without_the_pending_deletes_of_what_it_let_go() -> None:
    from voxline.realtime.events import parse_server_event
    from voxline.session.mirror import ConversationMirror
    from voxline.session.mirror.order import MAX_ITEMS

    mirror = ConversationMirror()
    mirror.apply(parse_server_event(json.dumps({"type": "conversation.item.added", "event_id": "e",
                                                "previous_item_id": None, "item": {
                                                    "id": "a0", "object": "realtime.item", "type": "message",
                                                    "role": "user", "status": "completed",
                                                    "content": [{"type": "input_text", "text": "hi"}]}})))
    data = mirror.to_json()
    first = data["items"][0]
    data["items"] = [first] + [{**first, "id": f"i{n}"} for n in range(MAX_ITEMS)]  # one more than it keeps
    data["pending_deletes"] = ["a0", "i7"]
    again = ConversationMirror.from_json(data)
    assert len(again) == MAX_ITEMS and "a0" not in again and again.pending_deletes == ("i7",)
