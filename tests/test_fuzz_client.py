"""Fuzzing the client: the decoder, the protocol core and the whole session pipeline.

Two sources of input:

* a mutation loop over real recorded server events (one conversation with tool calls and
  spoken turns, recorded from the local server): values swapped for hostile ones, keys
  dropped or added, types confused, text truncated or its bytes flipped, frames repeated
  and reordered; over 100,000 frames;
* Hypothesis, for structured frames built from the event vocabulary.

Every frame goes through the session machine a session runs (protocol core, session
core with its playout and barge-ins, input journal, tool tracker, metrics, mirror and its
rebuild), and a share of them through a real ``VoiceSession``. Nothing may raise.
"""

from __future__ import annotations

import asyncio
import json
import random
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile import run_faulted
from voxline.audio.playout import PlayoutBuffer
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.events import SERVER_EVENT_TYPES
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.transports.base import memory_pair
from voxline.session.bargein import Trigger
from voxline.session.events import SessionError
from voxline.session.machine import Effects, SessionMachine
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

import numpy as np

pytestmark = pytest.mark.slow  # 100,000 frames and a real session: the full suite's, not the inner loop's

MUTATED_FRAMES = 100_000
SESSION_FRAMES = 3_000

HOSTILE_VALUES: list[Any] = [
    None, True, 0, -1, 1, 1_000_000, 2**63, -2**63, 1e308, float("nan"), "", "x" * 5000, "é\u0000\udcff",
    [], {}, [1, "a"], {"type": "message"}, {"id": {}}, "AAAA", "!!!!", "AA==", [[[[[]]]]],
]


@cache
def recorded() -> tuple[str, ...]:
    """Every server frame of one real conversation (tools, speech, barge-in), as sent."""
    outcome = run_faulted(None, None)
    return tuple(json.dumps(frame) for _n, direction, frame in outcome.wire if direction == "in")


class Pipeline:
    """The session machine on one connection, driven the way ``VoiceSession`` drives it, minus the I/O.

    Tool calls are answered at once in place of the async runner; a lost connection is
    restored on a fresh protocol core, as after a drop.
    """

    def __init__(self) -> None:
        self.playout = PlayoutBuffer()
        self.machine = SessionMachine(SessionSettings(api_key="k"), self.playout)
        self.protocol = RealtimeProtocol()
        self.machine.attach(self.protocol)
        self.now = 0.0
        self.block = np.zeros(480, dtype=np.int16)

    def feed(self, text: str | bytes) -> None:
        self.protocol.receive(text)
        for out in self.protocol.events():
            self._run(self.machine.receive(out, self.now))
        self.machine.drain_tools()

    def _run(self, effects: Effects) -> None:
        for call in effects.calls:
            if self.machine.calls.begin(call.call_id):
                self.machine.calls.on_result(call.call_id, {"ok": True})

    def advance(self, rng: random.Random) -> None:
        """Time passes: the output plays a block, the machine ticks and captures; now and then a cut or a rebuild."""
        self.playout.read_into(self.block, self.now)
        self.now += 0.02
        self._run(self.machine.tick(self.now))
        self.machine.captured(self.block, self.now)
        roll = rng.random()
        if roll < 0.01:
            self._run(self.machine.interrupt(self.now, Trigger.INTERRUPT))
        elif roll < 0.015:
            self.machine.mirror.plan_rebuild(self.machine.mic.journal.audio_of)
            self.machine.mirror.to_json()
        self.protocol.data_to_send()

    def reconnect(self) -> None:
        """The connection drops and a new one takes the conversation over."""
        self.protocol.connection_lost()
        self.machine.connection_lost(self.now, 1006, "")
        self.protocol = RealtimeProtocol()
        self.machine.attach(self.protocol)
        self.machine.restore(self.now)
        self.protocol.data_to_send()


def mutate(frame: str, rng: random.Random) -> str | bytes:
    """One hostile variant of a real frame."""
    op = rng.randrange(9)
    if op == 0:  # truncated text
        return frame[: rng.randrange(len(frame))]
    if op == 1:  # flipped bytes
        raw = bytearray(frame.encode())
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    data = json.loads(frame)
    if op == 2:  # type confusion: another event's type over these fields
        data["type"] = rng.choice(sorted(SERVER_EVENT_TYPES))
        return json.dumps(data)
    paths = list(_paths(data))
    path = rng.choice(paths) if paths else ()
    if op in (3, 4, 5, 6) and path:
        _set(data, path, rng.choice(HOSTILE_VALUES))
    elif op == 7 and path:
        _delete(data, path)
    else:
        target = _get(data, path[:-1]) if path else data
        if isinstance(target, dict):
            target[rng.choice(["id", "item_id", "response_id", "content_index", "status", "x"])] = \
                rng.choice(HOSTILE_VALUES)
    return json.dumps(data, allow_nan=True)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Any:
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node[:8]):
            yield prefix + (index,)
            yield from _paths(value, prefix + (index,))


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


def _set(node: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(node, path[:-1])[path[-1]] = value


def _delete(node: Any, path: tuple[Any, ...]) -> None:
    parent = _get(node, path[:-1])
    del parent[path[-1]]


def frames(rng: random.Random, count: int) -> Any:
    """``count`` frames: the recorded conversation with mutants mixed in, repeated and reordered."""
    real = recorded()
    n = 0
    while n < count:
        for frame in real:
            roll = rng.random()
            if roll < 0.5:
                yield mutate(frame, rng)
                n += 1
            if roll > 0.9:
                yield rng.choice(real)  # a repeat from elsewhere in the conversation
                n += 1
            yield frame
            n += 1
            if n >= count:
                return


def test_the_pipeline_survives_100000_mutated_frames() -> None:
    rng = random.Random(20261201)
    pipeline = Pipeline()
    fed = 0
    for fed, frame in enumerate(frames(rng, MUTATED_FRAMES), 1):
        pipeline.feed(frame)
        if fed % 3 == 0:
            pipeline.advance(rng)
        if fed % 20_000 == 0:  # a new connection now and then, as after a drop
            pipeline.reconnect()
    assert fed >= MUTATED_FRAMES


frame_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
KEYS = ["response_id", "item_id", "output_index", "content_index", "delta", "response", "item", "previous_item_id",
        "audio_start_ms", "audio_end_ms", "error", "session", "call_id", "name", "arguments", "transcript", "part"]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SERVER_EVENT_TYPES)), st.dictionaries(st.sampled_from(KEYS), frame_values, max_size=8))
def test_structured_frames_never_raise(kind: str, fields: dict[str, Any]) -> None:
    pipeline = Pipeline()
    for frame in recorded()[:12]:  # a session and a response in progress
        pipeline.feed(frame)
    pipeline.feed(json.dumps({"type": kind, "event_id": "event_1", **fields}, allow_nan=True))
    pipeline.advance(random.Random(0))


def test_a_voice_session_survives_mutated_frames() -> None:
    """The same mutants through a real VoiceSession: no SessionError but malformed ones, still connected."""
    rng = random.Random(7)
    batch = list(frames(rng, SESSION_FRAMES))

    async def main() -> list[Any]:
        clock = VirtualClock()
        client, server = memory_pair(max_queue=10_000)

        async def connector() -> RealtimeConnection:
            return RealtimeConnection(client, on_wire=lambda direction, _text: received.append(direction))

        received: list[str] = []
        settings_ = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=0)
        session = VoiceSession(settings_, output=ClockedOutput(clock), clock=clock, connector=connector)
        events: list[Any] = []
        async with session:
            for n, frame in enumerate(batch):
                text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
                await server.send(text)
                if n % 50 == 0:
                    for _ in range(20):
                        await asyncio.sleep(0)
                    clock.advance(0.02)
                    events.extend(session.pending_events())
            while received.count("in") < len(batch):
                await asyncio.sleep(0)
            for _ in range(50):
                await asyncio.sleep(0)
            assert session.connected
            events.extend(session.pending_events())
        return events

    events = asyncio.run(main())
    errors = [e for e in events if isinstance(e, SessionError)]
    assert not [e for e in errors if e.code == "event_failed"], [e.message for e in errors if e.code == "event_failed"][:5]
    assert not [e for e in errors if e.fatal]
