"""The sans-I/O call tracker: outputs once, follow-ups once, across reconnects."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from voxline.realtime.errors import ToolError
from voxline.realtime.lifecycle import ResponseStatus
from voxline.realtime import events as ev
from voxline.session.tools import CallState, CallTracker, ToolCall
from tests.support.oracle import check_client_event

CREATE = ev.ResponseCreate()


def output(call_id: str, text: str) -> ev.ConversationItemCreate:
    return ev.ConversationItemCreate(item={"type": "function_call_output", "call_id": call_id, "output": text})


def announce(tracker: CallTracker, rid: str, call_id: str, name: str = "tool", arguments: str = "{}") -> list[ToolCall]:
    return tracker.on_arguments_done(rid, f"item_{call_id}", call_id, name, arguments)


def test_one_call_lifecycle() -> None:
    tracker = CallTracker()
    [call] = announce(tracker, "resp_1", "call_1", "get_weather", '{"city":"Oslo"}')
    assert call == ToolCall("call_1", "get_weather", '{"city":"Oslo"}', "resp_1", "item_call_1")
    assert tracker.state("call_1") is CallState.PENDING
    assert tracker.begin("call_1") and not tracker.begin("call_1")
    tracker.on_result("call_1", "sunny")
    assert tracker.commands() == [output("call_1", "sunny")]  # no follow-up before response.done
    assert tracker.on_response_done("resp_1", "completed") == []
    assert tracker.commands() == [CREATE]
    assert tracker.commands() == []


def test_commands_validate_against_the_oracle() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "c")
    tracker.on_result("c", {"temp": 21})
    tracker.on_response_done("r", "completed")
    commands = tracker.commands()
    assert commands == [output("c", '{"temp":21}'), CREATE]
    for command in commands:
        check_client_event(ev.client_event_dict(command))


def test_parallel_calls_get_one_create_after_the_last_output() -> None:
    tracker = CallTracker()
    for cid in ("a", "b", "c"):
        announce(tracker, "r", cid)
    tracker.on_response_done("r", "completed")
    tracker.on_result("b", "B")
    tracker.on_result("a", "A")
    assert tracker.commands() == [output("b", "B"), output("a", "A")]
    tracker.on_result("c", "C")
    assert tracker.commands() == [output("c", "C"), CREATE]


def test_duplicate_arguments_done_and_duplicate_results_are_ignored() -> None:
    tracker = CallTracker()
    assert len(announce(tracker, "r", "c")) == 1
    assert announce(tracker, "r", "c") == []
    assert tracker.begin("c")
    assert announce(tracker, "r", "c") == []
    tracker.on_result("c", "first")
    tracker.on_result("c", "second")
    tracker.on_response_done("r", "completed")
    tracker.on_response_done("r", "completed")
    assert tracker.commands() == [output("c", "first"), CREATE]


def test_cancelled_response_drops_unstarted_calls_and_never_follows_up() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "running", "a")
    announce(tracker, "r", "waiting", "b")
    assert tracker.begin("running")
    dropped = tracker.on_response_done("r", ResponseStatus.CANCELLED)
    assert [c.call_id for c in dropped] == ["waiting"]
    assert tracker.state("waiting") is CallState.DROPPED
    assert not tracker.begin("waiting")
    assert tracker.commands() == [
        output("waiting", '{"error":"b was not run: the response was cancelled before it started"}')
    ]
    tracker.on_result("running", "done anyway")
    tracker.on_result("waiting", "too late")
    assert tracker.commands() == [output("running", "done anyway")]


def test_late_call_of_a_failed_response_is_dropped_at_once() -> None:
    tracker = CallTracker()
    tracker.on_response_done("r", "failed")
    assert announce(tracker, "r", "c") == []
    assert tracker.state("c") is CallState.DROPPED
    assert [json.loads(c.item.output) for c in tracker.commands()] == [
        {"error": "tool was not run: the response was failed before it started"}
    ]


def test_incomplete_response_is_followed_up() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "c")
    tracker.on_response_done("r", "incomplete")
    tracker.on_result("c", "x")
    assert tracker.commands() == [output("c", "x"), CREATE]


def test_unknown_status_waits_for_the_real_outcome() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "c")
    assert tracker.on_response_done("r", ResponseStatus.UNKNOWN) == []
    tracker.on_result("c", "x")
    assert tracker.commands() == [output("c", "x")]
    tracker.on_response_done("r", "completed")
    assert tracker.commands() == [CREATE]
    tracker.on_response_done("r", "cancelled")  # a final status is final
    assert tracker.commands() == []


def test_non_final_status_is_refused() -> None:
    with pytest.raises(ToolError, match="response status 'in_progress' is not a final status"):
        CallTracker().on_response_done("r", "in_progress")


def test_unknown_call_id_is_a_tool_error() -> None:
    tracker = CallTracker()
    with pytest.raises(ToolError, match="unknown call_id 'nope'"):
        tracker.on_result("nope", "x")
    with pytest.raises(ToolError):
        tracker.begin("nope")


def test_non_serialisable_result_leaves_the_call_open() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "c")
    with pytest.raises(ToolError, match="not JSON-serialisable"):
        tracker.on_result("c", object())
    tracker.on_result("c", "fine")
    assert tracker.commands() == [output("c", "fine")]


def test_deleted_item_abandons_its_call() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "a")
    announce(tracker, "r", "b")
    tracker.begin("a")
    assert [c.call_id for c in tracker.on_item_deleted("item_a")] == ["a"]
    tracker.on_result("a", "ignored")
    tracker.on_result("b", "B")
    tracker.on_response_done("r", "completed")
    assert tracker.commands() == [output("b", "B"), CREATE]
    assert tracker.on_item_deleted("item_unknown") == []


def test_deleting_a_queued_output_takes_back_its_create() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "a")
    tracker.on_response_done("r", "completed")
    tracker.on_result("a", "A")
    tracker.on_item_deleted("item_a")
    assert tracker.commands() == []
    assert tracker.state("a") is CallState.ABANDONED


def test_deleting_after_the_output_was_sent_changes_nothing() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "a")
    tracker.on_result("a", "A")
    tracker.commands()
    assert tracker.on_item_deleted("item_a") == []
    tracker.on_response_done("r", "completed")
    assert tracker.commands() == [CREATE]


def test_export_import_continues_without_repeating() -> None:
    tracker = CallTracker()
    announce(tracker, "r", "sent")
    announce(tracker, "r", "queued")
    announce(tracker, "r", "running")
    announce(tracker, "r", "pending")
    tracker.on_result("sent", "S")
    tracker.commands()
    tracker.on_result("queued", "Q")
    tracker.begin("running")
    state = json.loads(json.dumps(tracker.export_state()))
    restored = CallTracker.from_state(state)
    assert announce(restored, "r", "sent") == [] and announce(restored, "r", "pending") == []
    assert [c.call_id for c in restored.runnable()] == ["pending"]
    assert [c.call_id for c in restored.running()] == ["running"]
    assert not restored.begin("running")
    assert restored.commands() == [output("queued", "Q")]
    restored.on_response_done("r", "completed")
    restored.on_result("running", "R")
    assert restored.begin("pending")
    restored.on_result("pending", "P")
    assert restored.commands() == [output("running", "R"), output("pending", "P"), CREATE]


def test_malformed_state_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="invalid call tracker state"):
        CallTracker.from_state({"version": 2, "calls": [], "responses": [], "pending": []})


# -- property test -----------------------------------------------------------------------

RESPONSES = ("r0", "r1", "r2")
CALLS = {rid: tuple(f"{rid}c{k}" for k in range(3)) for rid in RESPONSES}
ALL_CALLS = tuple(c for calls in CALLS.values() for c in calls)
RESPONSE_OF = {c: rid for rid, calls in CALLS.items() for c in calls}
STATUSES = ("completed", "incomplete", "cancelled", "failed", "unknown")
FOLLOW_UP = {"completed", "incomplete"}


class TrackerWalk(RuleBasedStateMachine):
    """Random interleavings of server events, tool results, deletions and reconnects.

    The machine plays both the server (which announces calls only before a response's
    ``response.done``) and a runner (which starts a call only when ``begin`` allows it),
    and checks every command the tracker hands out against the rules.
    """

    @initialize()
    def start(self) -> None:
        self.tracker = CallTracker()
        self.announced: dict[str, set[str]] = {rid: set() for rid in RESPONSES}
        self.status: dict[str, str] = {}
        self.started: set[str] = set()
        self.running: set[str] = set()
        self.deleted: set[str] = set()
        self.outputs: Counter[str] = Counter()
        self.followed_up: list[str] = []

    def final_status(self, rid: str) -> str | None:
        status = self.status.get(rid)
        return None if status in (None, "unknown") else status

    @rule(call=st.sampled_from(ALL_CALLS))
    def arguments_done(self, call: str) -> None:
        rid = RESPONSE_OF[call]
        seen = call in self.announced[rid]
        if rid in self.status and not seen:
            return  # the server announces calls before response.done only
        returned = announce(self.tracker, rid, call)
        assert len(returned) <= 1 and (not seen or returned == [])
        self.announced[rid].add(call)

    @rule(rid=st.sampled_from(RESPONSES), status=st.sampled_from(STATUSES))
    def response_done(self, rid: str, status: str) -> None:
        if self.final_status(rid) is None:
            self.status[rid] = status
        self.tracker.on_response_done(rid, status)

    @rule(call=st.sampled_from(ALL_CALLS))
    def begin(self, call: str) -> None:
        if call not in self.announced[RESPONSE_OF[call]]:
            return
        if self.tracker.begin(call):
            assert call not in self.started, f"{call} started twice"
            self.started.add(call)
            self.running.add(call)

    @rule(call=st.sampled_from(ALL_CALLS), duplicate=st.booleans())
    def result(self, call: str, duplicate: bool) -> None:
        if call in self.running or (duplicate and call in self.started):
            self.tracker.on_result(call, {"call": call})
            self.running.discard(call)

    @rule(call=st.sampled_from(ALL_CALLS))
    def answer_without_running(self, call: str) -> None:
        """A runner answering a call it refuses (bad arguments, unknown tool) claims it first."""
        if call in self.announced[RESPONSE_OF[call]] and self.tracker.begin(call):
            assert call not in self.started
            self.started.add(call)
            self.tracker.on_result(call, '{"error":"invalid arguments"}')

    @rule(call=st.sampled_from(ALL_CALLS))
    def delete_item(self, call: str) -> None:
        if call in self.announced[RESPONSE_OF[call]]:
            self.tracker.on_item_deleted(f"item_{call}")
            self.deleted.add(call)

    @rule()
    def send(self) -> None:
        for command in self.tracker.commands():
            self.check(command)

    @rule()
    def reconnect(self) -> None:
        state = json.loads(json.dumps(self.tracker.export_state()))
        self.tracker = CallTracker.from_state(state)

    def check(self, command: ev.ClientEvent) -> None:
        if isinstance(command, ev.ConversationItemCreate):
            call = command.item.call_id
            self.outputs[call] += 1
            assert self.outputs[call] == 1, f"second output for {call}"
            assert isinstance(command.item.output, str)
            return
        assert command == CREATE
        candidates = [
            rid
            for rid in RESPONSES
            if rid not in self.followed_up
            and self.final_status(rid) in FOLLOW_UP
            and any(self.outputs[c] for c in self.announced[rid])
            and all(self.outputs[c] == 1 or c in self.deleted for c in self.announced[rid])
        ]
        assert candidates, "response.create before all outputs of a finished response"
        self.followed_up.append(candidates[0])

    @invariant()
    def nothing_runs_for_dropped_calls(self) -> None:
        for call in self.running:
            assert self.tracker.state(call) in (CallState.RUNNING, CallState.ABANDONED)

    def teardown(self) -> None:
        if not hasattr(self, "tracker"):
            return
        for call in self.tracker.runnable():
            assert call.call_id not in self.started
            assert self.tracker.begin(call.call_id)
            self.started.add(call.call_id)
            self.running.add(call.call_id)
        for call in sorted(self.running):
            self.tracker.on_result(call, "late")
        self.send()
        for rid in RESPONSES:
            for call in self.announced[rid] - self.deleted:
                assert self.outputs[call] == 1, f"{call} has no output"
        expected = {
            rid
            for rid in RESPONSES
            if self.final_status(rid) in FOLLOW_UP and any(self.outputs[c] for c in self.announced[rid])
        }
        assert sorted(self.followed_up) == sorted(expected)
        assert len(self.followed_up) == len(set(self.followed_up))


TrackerWalk.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_tracker_walk = TrackerWalk.TestCase
