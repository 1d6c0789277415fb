"""The response lifecycle table, walked exhaustively and by Hypothesis against a model server."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.realtime.lifecycle import (
    RESPONSE_TRANSITIONS,
    TERMINAL_STATUSES,
    TRANSITIONS,
    Action,
    Input,
    ResponseStatus,
    Slot,
    step,
)
from voxline.realtime.protocol import RealtimeProtocol


def test_every_state_input_pair_has_exactly_one_transition() -> None:
    assert set(TRANSITIONS) == {(s, i) for s in Slot for i in Input}


@given(st.sampled_from(list(Slot)), st.sampled_from(list(Input)))
def test_actions_are_legal_for_their_state(slot: Slot, inp: Input) -> None:
    nxt, actions = step(slot, inp)
    if Action.SEND_CANCEL in actions:
        # a cancel goes out only once the server has named an active response
        assert inp is Input.CREATED or slot is Slot.ACTIVE
    if Action.SEND_CREATE in actions:
        assert slot is Slot.IDLE and nxt is Slot.REQUESTED
    if inp is Input.DISCONNECT:
        assert nxt is Slot.IDLE and Action.LOSE_ALL in actions
    if inp is Input.DONE and slot in (Slot.ACTIVE, Slot.CANCELLING):
        assert nxt is Slot.IDLE and Action.FLUSH_QUEUE in actions


def test_terminal_response_statuses_are_final() -> None:
    for status in TERMINAL_STATUSES:
        assert RESPONSE_TRANSITIONS[status] == frozenset()
    assert ResponseStatus.ACTIVE in RESPONSE_TRANSITIONS[ResponseStatus.REQUESTED]


class ModelServer:
    """The service's response rules, reduced to what the slot is about (docs/protocol.md §7, §10)."""

    def __init__(self) -> None:
        self.active: str | None = None
        self.count = 0
        self.from_client = 0
        self.errors: list[str] = []
        self.out: deque[str] = deque()

    def _emit(self, payload: dict[str, Any]) -> None:
        self.count += 1
        payload["event_id"] = f"event_{self.count}"
        self.out.append(json.dumps(payload))

    def _response(self, rid: str, status: str) -> dict[str, Any]:
        return {"id": rid, "object": "realtime.response", "status": status, "output": [], "conversation_id": "conv_1"}

    def start(self) -> None:
        self.count += 1
        self.active = f"resp_{self.count}"
        self._emit({"type": "response.created", "response": self._response(self.active, "in_progress")})

    def finish(self, status: str = "completed") -> None:
        if self.active is not None:
            self._emit({"type": "response.done", "response": self._response(self.active, status)})
            self.active = None

    def _error(self, code: str, event_id: str) -> None:
        self.errors.append(code)
        error = {"type": "invalid_request_error", "code": code, "message": code, "param": None, "event_id": event_id}
        self._emit({"type": "error", "error": error})

    def handle(self, text: str) -> None:
        event = json.loads(text)
        match event["type"]:
            case "response.create":
                if self.active is not None:
                    self._error("conversation_already_has_active_response", event["event_id"])
                else:
                    self.from_client += 1
                    self.start()
            case "response.cancel":
                if self.active is None:
                    self._error("response_cancel_not_active", event["event_id"])
                else:
                    self.finish("cancelled")
            case other:
                raise AssertionError(f"unexpected client event {other}")


STEPS = st.lists(
    st.sampled_from(["create", "cancel", "to_server", "to_client", "vad", "finish"]), min_size=1, max_size=60
)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_no_create_is_lost_or_doubled_under_races(steps: list[str]) -> None:
    client, server = RealtimeProtocol(), ModelServer()
    wire: deque[str] = deque()
    requested = 0

    def pump_client() -> None:
        wire.extend(client.data_to_send())
        client.events()

    for s in steps:
        match s:
            case "create":
                client.create_response()
                requested += 1
            case "cancel":
                client.cancel_response()
            case "to_server" if wire:
                server.handle(wire.popleft())
            case "to_client" if server.out:
                client.receive(server.out.popleft())
            case "vad" if server.active is None:
                server.start()
            case "finish":
                server.finish()
            case _:
                pass
        pump_client()
    # quiesce: deliver everything and let every response finish
    for _ in range(10 * (requested + 5)):
        pump_client()
        if wire:
            server.handle(wire.popleft())
        elif server.out:
            client.receive(server.out.popleft())
        elif server.active is not None:
            server.finish()
        else:
            break
    assert not wire and not server.out and server.active is None
    assert server.from_client == requested, "every requested response was created exactly once"
    assert client.slot is Slot.IDLE and client.queued_creates == 0


def test_create_while_active_is_queued_until_done() -> None:
    client, server = RealtimeProtocol(), ModelServer()
    client.create_response()
    client.create_response()
    frames = client.data_to_send()
    assert [json.loads(f)["type"] for f in frames] == ["response.create"]
    server.handle(frames[0])
    client.receive(server.out.popleft())
    assert client.active_response_id == "resp_1"
    assert client.data_to_send() == []
    server.finish()
    client.receive(server.out.popleft())
    assert [json.loads(f)["type"] for f in client.data_to_send()] == ["response.create"]


def test_cancel_with_nothing_active_sends_nothing() -> None:
    client = RealtimeProtocol()
    assert client.cancel_response() is False
    assert client.data_to_send() == []


def test_cancel_before_created_is_sent_when_the_server_names_the_response() -> None:
    client, server = RealtimeProtocol(), ModelServer()
    client.create_response()
    server.handle(client.data_to_send()[0])
    assert client.cancel_response() is True
    assert client.data_to_send() == []
    client.receive(server.out.popleft())
    (cancel,) = [json.loads(f) for f in client.data_to_send()]
    assert cancel["type"] == "response.cancel" and cancel["response_id"] == "resp_1"
