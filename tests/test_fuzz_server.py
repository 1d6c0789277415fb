"""Fuzzing the local server's sans-I/O engine: arbitrary client frames and mutated real client events.

For every frame: no exception leaves the engine, every event it sends validates against the
official SDK's server event types, and a frame that is bad (not JSON, not an object, an
unknown type, or an event the SDK's own client types reject) is answered with an ``error``
event. Sized for more than 20,000 cases in well under a minute; no example database is
written (``database=None``), so the test leaves no files behind.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.oracle import check_client_event, check_server_event
from tests.support.engine_harness import Harness

pytestmark = pytest.mark.slow  # fuzzing the engine with thousands of frames

EXAMPLES = 1_500  # each of the two sequence tests; one to three frames an example
BUSY_EXAMPLES = 1_000
LOOP_CASES = 60_000
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                phases=[Phase.explicit, Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))

_AUDIO = base64.b64encode(bytes(4800)).decode()  # 100 ms of silence

# Client events as real clients send them (the official SDK, openai-agents, LiveKit, pipecat, voxline).
REAL_EVENTS: list[dict[str, Any]] = [
    {"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief.",
                                           "output_modalities": ["audio"]}},
    {"type": "session.update", "event_id": "evt_1", "session": {
        "type": "realtime", "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "transcription": None,
                      "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                                         "silence_duration_ms": 200, "create_response": True,
                                         "interrupt_response": True}},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}},
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather for a city.",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}}],
        "tool_choice": "auto"}},
    {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}}},
    {"type": "session.update", "session": {"type": "realtime", "audio": {"input": {
        "format": {"type": "audio/pcmu"}, "turn_detection": {"type": "semantic_vad", "eagerness": "low"}}}}},
    {"type": "input_audio_buffer.append", "audio": _AUDIO},
    {"type": "input_audio_buffer.append", "event_id": "evt_2", "audio": _AUDIO * 3},
    {"type": "input_audio_buffer.commit"},
    {"type": "input_audio_buffer.clear", "event_id": "evt_3"},
    {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "What's the weather?"}]}},
    {"type": "conversation.item.create", "previous_item_id": "item_user", "item": {
        "id": "item_sys", "type": "message", "role": "system",
        "content": [{"type": "input_text", "text": "Answer in French."}]}},
    {"type": "conversation.item.create", "item": {
        "type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'}},
    {"type": "conversation.item.create", "item": {
        "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Earlier answer."}]}},
    {"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_audio", "audio": _AUDIO}]}},
    {"type": "conversation.item.retrieve", "item_id": "item_user"},
    {"type": "conversation.item.delete", "item_id": "item_user"},
    {"type": "conversation.item.truncate", "item_id": "item_user", "content_index": 0, "audio_end_ms": 500},
    {"type": "response.create"},
    {"type": "response.create", "response": {"instructions": None, "metadata": {"client_event_id": "x"}}},
    {"type": "response.create", "response": {"conversation": "none", "output_modalities": ["text"],
                                             "input": [{"type": "item_reference", "id": "item_user"}]}},
    {"type": "response.cancel"},
    {"type": "response.cancel", "response_id": "resp_unknown"},
]
SUPPORTED = sorted({e["type"] for e in REAL_EVENTS})

_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
            | st.sampled_from(["", "item_user", "realtime", "audio/pcm", "server_vad", "inf", _AUDIO[:10], "==",
                               "\ud800", "\x00"]))
json_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

_ODD_VALUES: list[Any] = [None, True, 0, -1, 1.5, -0.0, 10**30, 2**63, 1e308, "", "x", "item_user", "\ud800",
                          "\x00" * 3, "inf", [], [None], {}, {"type": "realtime"}, {"type": []}, [[[]]],
                          _AUDIO[:7], "====", "A" * 5, {"id": {}}, ["audio", "text"]]
_TYPES = [*SUPPORTED, "output_audio_buffer.clear", "transcription_session.update", "response.audio.delta", ""]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indices)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def mutate(event: dict[str, Any], rng: random.Random) -> str:
    """A real client event with one to three structural mutations, as JSON text, sometimes mangled as text."""
    event = copy.deepcopy(event)
    root: Any = event
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(root))
        target = _at(root, path)
        parent = _at(root, path[:-1]) if path else None
        match rng.choice(["replace", "delete", "add", "retype", "grow"]):
            case "replace" if parent is not None:
                parent[path[-1]] = copy.deepcopy(rng.choice(_ODD_VALUES))
            case "replace":
                root = copy.deepcopy(rng.choice(_ODD_VALUES))
            case "delete" if parent is not None:
                del parent[path[-1]]
            case "add" if isinstance(target, dict):
                target[rng.choice(["extra", "type", "id", "event_id", "content", "audio"])] = copy.deepcopy(
                    rng.choice(_ODD_VALUES))
            case "add" if isinstance(target, list):
                target.append(copy.deepcopy(rng.choice(_ODD_VALUES)))
            case "retype" if isinstance(root, dict):
                root["type"] = rng.choice(_TYPES)
            case "grow" if parent is not None and isinstance(target, (int, float)) and not isinstance(target, bool):
                parent[path[-1]] = rng.choice([10**30, -1, 1e308, -0.0, 2**63, 0.5, 10**6])
            case "grow" if parent is not None and isinstance(target, str):
                parent[path[-1]] = target * rng.randint(2, 50)
            case _:
                pass
    text = json.dumps(root, allow_nan=True)
    match rng.choice(["as is", "as is", "as is", "cut", "constant", "byte"]):
        case "cut":
            text = text[: rng.randint(0, max(0, len(text) - 1))]
        case "constant":  # JSON's non-standard constants, which Python's decoder accepts unless told not to
            text = text.replace(": 0", ": NaN", 1).replace(": 500", ": Infinity", 1).replace(": true", ": -Infinity", 1)
        case "byte":
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(["\x00", "\\", '"', "{", "]", "\ufeff", "\\ud800", ","]) + text[at:]
    return text


mutated_events = st.builds(mutate, st.sampled_from(REAL_EVENTS), st.randoms(use_true_random=False))


arbitrary_frames = st.one_of(
    st.text(max_size=80),
    st.binary(max_size=40),
    json_values.map(json.dumps),
    st.dictionaries(st.text(max_size=10), json_values, max_size=5).map(json.dumps),
    st.builds(lambda t, body: json.dumps({"type": t, **body}),
              st.sampled_from([*SUPPORTED, "", "session.created", "response.audio.delta"]),
              st.dictionaries(st.sampled_from(["event_id", "session", "audio", "item", "item_id", "response",
                                               "response_id", "content_index", "audio_end_ms", "previous_item_id"]),
                              json_values, max_size=4)),
)


def _is_bad(frame: str | bytes) -> bool:
    """Bad by the service's own rules: not a JSON object, an unsupported type, or refused by the SDK's types."""
    if isinstance(frame, bytes):
        return True
    try:
        data = json.loads(frame, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return True
    if not isinstance(data, dict) or data.get("type") not in SUPPORTED:
        return True
    try:
        check_client_event(_without_references(data))
    except (AssertionError, ValueError, TypeError):
        return True
    return False


def _without_references(data: dict[str, Any]) -> dict[str, Any]:
    """``response.input`` may hold ``item_reference`` entries (docs/protocol.md §4) that the SDK's types lack."""
    response = data.get("response")
    if data.get("type") != "response.create" or not isinstance(response, dict):
        return data
    entries = response.get("input")
    if not isinstance(entries, list):
        return data
    kept = [e for e in entries if not (isinstance(e, dict) and e.get("type") == "item_reference"
                                       and isinstance(e.get("id"), str) and set(e) <= {"type", "id"})]
    return {**data, "response": {**response, "input": kept}}


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_USER_ITEM = json.dumps({"type": "conversation.item.create", "item": {
    "id": "item_user", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}})


def _prepared(speed: float = math.inf, *, replied: bool = False) -> Harness:
    """An engine in manual turns with a user item ``item_user`` (and, if ``replied``, a finished reply)."""
    harness = Harness(speed=speed)
    harness.receive(json.dumps(REAL_EVENTS[2]))  # manual turns: appended audio starts no response by itself
    harness.receive(_USER_ITEM)
    if replied:
        harness.receive('{"type": "response.create"}')
        harness.run()
    return harness


def _frame(harness: Harness, frame: str | bytes, step: float) -> None:
    """One frame: no exception, valid events, an ``error`` for a bad frame; then time moves on."""
    events = harness.receive(frame)
    for ev in events:
        check_server_event(ev)
    if _is_bad(frame):
        assert any(ev["type"] == "error" for ev in events), (frame, events)
    harness.now += step
    for ev in harness.poll():
        check_server_event(ev)


def _drain(harness: Harness) -> None:
    harness.now += 60.0
    for ev in harness.run():
        check_server_event(ev)


_steps = st.lists(st.sampled_from([0.0, 0.01, 0.2, 1.0, 30.0]), min_size=3, max_size=3)


@FUZZ
@given(frames=st.lists(mutated_events, min_size=1, max_size=3), steps=_steps, replied=st.booleans())
def test_mutated_real_events(frames: list[str], steps: list[float], replied: bool) -> None:
    harness = _prepared(replied=replied)
    for frame, step in zip(frames, steps, strict=False):
        _frame(harness, frame, step)
    _drain(harness)


@FUZZ
@given(frames=st.lists(arbitrary_frames, min_size=1, max_size=3), steps=_steps)
def test_arbitrary_frames(frames: list[str | bytes], steps: list[float]) -> None:
    harness = _prepared()
    for frame, step in zip(frames, steps, strict=False):
        _frame(harness, frame, step)
    _drain(harness)


@settings(FUZZ, max_examples=BUSY_EXAMPLES)
@given(frame=mutated_events | arbitrary_frames)
def test_single_frames_against_a_busy_engine(frame: str | bytes) -> None:
    """One frame into an engine mid-response (audio streaming at real time), then the response runs out."""
    harness = _prepared(speed=1.0)
    harness.receive('{"type": "response.create"}')
    harness.now += 0.3  # a few chunks of the reply are out
    harness.poll()
    _frame(harness, frame, 0.0)
    _drain(harness)


def test_mutation_loop_over_real_events() -> None:
    """A plain seeded loop, cheaper per case than Hypothesis: mutated events into long-lived engines."""
    rng = random.Random(20261201)
    cases = 0
    while cases < LOOP_CASES:
        harness = _prepared(speed=rng.choice([math.inf, 1.0]), replied=rng.random() < 0.3)
        for _ in range(50):
            frame = mutate(rng.choice(REAL_EVENTS), rng) if rng.random() < 0.8 else json.dumps(rng.choice(REAL_EVENTS))
            _frame(harness, frame, rng.choice([0.0, 0.01, 0.2, 1.0]))
            cases += 1
        _drain(harness)
    assert cases >= LOOP_CASES
