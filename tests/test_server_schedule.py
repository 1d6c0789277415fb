"""A response's schedule makes each step only when it reaches it, in the order given; a poll orders the steps of
many responses without looking at all of them for each."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from voxline.realtime.server.engine.responses import ResponseRun
from voxline.realtime.server.engine.schedule import Schedule, Step
from tests.support.engine_harness import Harness, only


def steps(made: list[int], plan: list[tuple[float, int | None]]) -> Iterator[Step]:
    """The steps of ``plan``; ``made`` counts how many were made so far."""
    for k, (at, output) in enumerate(plan):
        made.append(k)
        yield Step(at, output, lambda k=k: [{"step": k}])  # type: ignore[misc]


def taken(schedule: Schedule, now: float) -> list[int]:
    out = []
    while (step := schedule.take_due(now)) is not None:
        out.extend(event["step"] for event in step.action())
    return out


def test_a_long_reply_makes_one_step_at_its_start_and_one_per_step_taken() -> None:
    made: list[int] = []
    schedule = Schedule(steps(made, [(0.025 * j, 0) for j in range(600)] + [(15.0, None)]))
    assert len(made) == 1 and schedule.next_due == 0.0
    assert taken(schedule, 0.05) == [0, 1, 2] and len(made) == 4
    assert schedule.next_due == 0.025 * 3


def test_steps_come_in_their_order_when_due() -> None:
    schedule = Schedule(steps([], [(0.0, 0), (0.1, 0), (0.1, 1), (0.3, None)]))
    assert taken(schedule, 0.05) == [0]
    assert taken(schedule, 0.1) == [1, 2]
    assert taken(schedule, 0.2) == [] and schedule.next_due == 0.3
    assert taken(schedule, 1.0) == [3] and schedule.next_due is None


def test_a_dropped_output_loses_its_steps_the_next_one_included() -> None:
    schedule = Schedule(steps([], [(0.0, 0), (0.1, 1), (0.2, 0), (0.3, 1), (0.4, None)]))
    assert taken(schedule, 0.0) == [0]
    schedule.drop_output(1)  # its next step is the one waiting
    assert schedule.next_due == 0.2
    assert taken(schedule, 1.0) == [2, 4]  # the response's own step stays


def test_a_cleared_schedule_is_done() -> None:
    made: list[int] = []
    schedule = Schedule(steps(made, [(0.0, 0), (0.1, 0)]))
    schedule.clear()
    assert schedule.next_due is None and taken(schedule, 9.0) == [] and len(made) == 1
    assert Schedule().next_due is None


def test_a_poll_of_many_responses_at_once_asks_each_for_its_next_step_once_a_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Out-of-band responses run side by side, as many as a client asks for: a poll that looked at every response
    for each step it took cost the square of their number (2,000 of them held the loop for seconds)."""
    h = Harness(speed=1.0)
    for _ in range(200):
        h.engine.receive(json.dumps({"type": "response.create", "response": {"conversation": "none"}}), 0.0)
    looks = 0
    next_due = ResponseRun.next_due

    def counted(run: ResponseRun) -> float | None:
        nonlocal looks
        looks += 1
        return next_due(run)

    monkeypatch.setattr(ResponseRun, "next_due", counted)
    events = h.engine.poll(60.0)
    steps = sum(e["type"] != "rate_limits.updated" for e in events)
    assert len(only(events, "response.done")) == 200
    assert looks <= 200 + 2 * steps
