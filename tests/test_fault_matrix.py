"""Every fault × every point of a conversation: the session recovers and nothing is lost.

Each cell plays the same conversation (a typed question answered with a tool call, two
spoken turns with parallel calls) through a real VoiceSession and the local server's
engine, in lockstep, with one fault injected by a hostile network (tests/support/hostile.py). After
each run:

* no exception escaped, no fatal error, and the session recovered (a malformed frame is
  reported and the connection kept);
* the mirror equals the final server conversation, item for item;
* every user turn is there, every tool call with its output, and every assistant item the
  listener heard part of, with the text they heard;
* every user turn got its answer; no owed ``response.create`` was sent twice;
* no tool ran twice.

The table of faults tried and survived is printed at the end of the test run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import numpy as np

from voxline.session.events import BargeIn, ConnectionLost, ConnectionRestored, SessionError, TranscriptDelta
from voxline.session.mirror.heard import estimate_heard_text
from voxline.session.tools import ToolFinished, ToolStarted
from tests.support.fault_matrix import RESULTS
from tests.support.hostile import FAULTS, POINTS, Fault, Outcome, run_faulted, spoken_bursts

pytestmark = pytest.mark.slow  # every fault at every point of a conversation


def voiced(samples: np.ndarray) -> int:
    return int(np.count_nonzero(np.abs(samples.astype(np.int32)) > 300))


def _user_turns(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("type") == "message" and i.get("role") == "user"]


def check(outcome: Outcome, fault: Fault | None) -> None:
    events = outcome.events
    errors = [e for e in events if isinstance(e, SessionError)]
    assert not [e for e in errors if e.fatal], errors
    assert not [e for e in errors if e.code == "event_failed"], errors  # the last-resort guard never fired
    lost = [e for e in events if isinstance(e, ConnectionLost)]
    restored = [e for e in events if isinstance(e, ConnectionRestored)]
    if fault is not None:
        assert outcome.run.fired, "the fault never fired"
        if fault.kind == "malformed":
            assert not lost and any(e.code == "malformed_event" for e in errors)
        else:
            assert lost and restored and len(restored) >= len(lost) - 0
            assert all(r.resent_creates <= 1 for r in restored), restored

    server = outcome.server_items()
    mirror = [m for m in outcome.mirror]
    assert [m.id for m in mirror] == [i["id"] for i in server], "the mirror differs from the server conversation"

    # every user turn: the typed question and both spoken turns
    users = _user_turns(server)
    assert len(users) == 3, [u.get("content") for u in users]
    assert any(p.get("text") == "What is the weather in Paris?" for p in users[0]["content"])
    entries = list(outcome.engines[-1]._state.conversation)
    spoken = [e for e in entries if e.item in users[1:]]
    for entry, said in zip(spoken, spoken_bursts(), strict=True):  # the whole of what the user said
        kept = sum(voiced(np.frombuffer(entry.kept_audio(i), dtype="<i2")) for i in entry.audio)
        assert kept >= 0.99 * voiced(said), f"a spoken turn kept {kept} of {voiced(said)} voiced samples"

    # every user turn answered: an assistant item follows it
    ids = [i["id"] for i in server]
    for user in users:
        after = server[ids.index(user["id"]) + 1:]
        nxt = next((i for i in after if i.get("role") == "user"), None)
        window = after[:after.index(nxt)] if nxt is not None else after
        assert any(i.get("role") == "assistant" or i.get("type") == "function_call" for i in window), \
            f"user turn {user['id']} was never answered"

    # tools: each call ran once, and every output reached the final conversation with its call
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert len({e.call_id for e in started}) == len(started), "a call started twice"
    assert sum(outcome.invocations.values()) == len(started), "a tool ran outside a call"
    finished = {e.call_id for e in events if isinstance(e, ToolFinished)}
    calls = {i["call_id"] for i in server if i.get("type") == "function_call"}
    outputs = Counter(i["call_id"] for i in server if i.get("type") == "function_call_output")
    assert all(n == 1 for n in outputs.values()), outputs
    for call_id in finished:
        assert call_id in calls and outputs[call_id] == 1, f"the output of {call_id} was lost"

    # what the listener heard of a reply cut by the drop is in the conversation, as heard
    by_id = {m.id: m for m in mirror}
    for at, cut in ((n, e) for n, e in enumerate(events) if isinstance(e, BargeIn) and e.trigger == "connection_lost"):
        for item_id, _index, heard_ms in cut.heard_parts:
            said = "".join(e.text for e in events[:at] if isinstance(e, TranscriptDelta) and e.item_id == item_id)
            if estimate_heard_text(said, heard_ms, cut.received_ms):  # heard words, not just a sound
                assert item_id in by_id, f"heard audio of {item_id} was lost"
                text = " ".join(p.get("text", "") for p in server[ids.index(item_id)].get("content", []))
                assert text.strip() and text.strip() == by_id[item_id].heard_text.strip()

    # no create was answered "already has an active response": none was sent twice
    refused = [f for _n, d, f in outcome.wire if d == "in" and f["type"] == "error"
               and f["error"].get("code") == "conversation_already_has_active_response"]
    assert not refused, refused


def test_the_conversation_without_faults_passes_the_checks() -> None:
    check(run_faulted(None, None), None)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
@pytest.mark.parametrize("point", list(POINTS), ids=list(POINTS))
def test_fault(fault: Fault, point: str) -> None:
    state, trigger = POINTS[point]
    ok = False
    try:
        check(run_faulted(fault, trigger), fault)
        ok = True
    finally:
        RESULTS[(fault.name, point)] = ok


def test_a_drop_after_any_server_event_loses_nothing() -> None:
    """A network error right after each server event of the conversation (every 15th audio or
    transcript delta): each run must pass the same checks as the matrix."""
    network = next(f for f in FAULTS if f.kind == "network")
    frames = [f["type"] for _n, d, f in run_faulted(None, None).wire if d == "in"]
    streaming = {"response.output_audio.delta", "response.output_audio_transcript.delta"}
    points = [i for i, kind in enumerate(frames) if kind not in streaming or i % 15 == 0]
    failed = []
    for index in points:
        def after(direction: str, _frame: dict[str, Any], run: Any, nth: int = index + 1) -> bool:
            return direction == "in" and sum(n for k, n in run.seen.items() if k.startswith("in:")) == nth

        try:
            check(run_faulted(network, after), network)
        except AssertionError as exc:
            failed.append(f"after {frames[index]} (#{index}): {str(exc).splitlines()[0][:120]}")
    assert len(points) > 100 and not failed, failed
