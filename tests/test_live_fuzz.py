"""Fuzzing the Live engine: mutated real client events and arbitrary frames, before and after start.

For every frame: nothing raises out of the engine, every event it emits validates against
``openai.types.live`` for its audience, and a frame the SDK's own client types reject is answered
with an ``error`` (the session goes on). Seeded, so every run tries the same cases.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from typing import Any

import numpy as np
import pytest

from tests.support.live_harness import LiveHarness, script
from tests.support.live_oracle import check_live_client_event

pytestmark = pytest.mark.slow  # thousands of frames

CASES = 3_000
_AUDIO = base64.b64encode(bytes(960)).decode()  # 20 ms of silence

REAL: list[dict[str, Any]] = [
    {"type": "session.start", "event_id": "s", "session": {
        "model": "gpt-live-1", "instructions": "Be brief.", "audio": {"format": {"type": "audio/pcm", "rate": 24000},
                                                                       "output": {"voice": "marin"}},
        "delegation": {"type": "responses", "responses": {"model": "gpt-5.4-mini", "tools": []}},
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}},
    {"type": "session.input_audio.append", "audio": _AUDIO},
    {"type": "session.input_audio.mute", "event_id": "m"},
    {"type": "session.input_audio.unmute"},
    {"type": "session.commentary.append", "delegation_id": None, "content": "Greet the caller."},
    {"type": "session.thinking.append", "delegation_id": None, "content": "quiet"},
    {"type": "session.instructions.append", "delegation_id": None, "content": "Be kind."},
    {"type": "session.update", "session": {"delegation": {"type": "responses", "acknowledgement_delay_ms": 100}}},
    {"type": "response.item.create", "item": {"type": "function_call_output", "call_id": "call_1", "output": "ok"}},
    {"type": "response.create"},
    {"type": "session.output_audio.fixture.play", "audio": base64.b64encode(bytes(480)).decode()},
]

_VALUES: list[Any] = [None, True, 0, -1, 2**70, 1.5, "", "x" * 300, [], {}, [1, {"a": None}], {"type": None}]


def _mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        copy_ = dict(value)
        roll = rng.random()
        if roll < 0.25:
            del copy_[key]
        elif roll < 0.45:
            copy_[rng.choice(["extra", "type", "session", "audio", "model", key + "_"])] = rng.choice(_VALUES)
        else:
            copy_[key] = _mutate(rng, value[key], depth + 1)
        return copy_
    if isinstance(value, list) and value and rng.random() < 0.5:
        return [_mutate(rng, v, depth + 1) for v in value]
    return rng.choice(_VALUES) if rng.random() < 0.5 or depth > 3 else value


def _frames(rng: random.Random) -> list[str | bytes]:
    frames: list[str | bytes] = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.1:
            frames.append(rng.choice(["", "{", "[]", "null", "\"text\"", "{\"type\": 7}", "\ufeff{}", "1e999"]))
        elif roll < 0.15:
            frames.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 8))))
        else:
            frames.append(json.dumps(_mutate(rng, copy.deepcopy(rng.choice(REAL)))))
    return frames


def _valid(frame: str | bytes) -> bool:
    try:
        check_live_client_event(frame)
    except (AssertionError, ValueError, UnicodeDecodeError):
        return False
    return True


@pytest.mark.parametrize("started", [False, True])
def test_no_frame_breaks_the_engine_and_every_bad_one_is_answered(started: bool) -> None:
    rng = random.Random(25 + started)
    scenario = script({"output": [{"say": "One."}, {"call": "f", "arguments": {}}], "after": {"say": "Two."}},
                      user_says=["Hi."])
    for _ in range(CASES // 2):
        h = LiveHarness(scenario=scenario, observers=1)
        if started:
            h.start()
        for frame in _frames(rng):
            before = len(h.primary) + len(h.origin)
            new = h.send(frame)  # validates every event for its audience; raises if the engine does
            if not _valid(frame) and not (started and frame == json.dumps(REAL[0])):
                assert any(e["type"] == "error" for e in new) or h.engine.closed, (frame, new)
            assert len(h.primary) + len(h.origin) >= before
        h.feed(np.zeros(2400, dtype=np.int16))  # and the session still runs
