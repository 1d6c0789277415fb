"""``voxline replay --fast``: client and built-in server in lockstep on a virtual clock.

Each step of one block (20 ms): the server's scheduled events due by now reach the
client; the client's queued frames reach the server; the input block captured during the
last 20 ms is appended; then the output reads the next block of playout. Frames cross as
JSON text, exactly as on a socket, so the wire log and the oracle see the same events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from voxline.base.clock import VirtualClock
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.server.engine import Engine
from voxline.realtime.server.responses import Pacing
from voxline.realtime.server.scenario import Scenario
from voxline.realtime.server.state import EngineConfig
from voxline.realtime.server.voices import make_synth, supply_speech

from ..core import SessionCore
from ..events import BargeIn
from .result import ReplayResult
from .timeline import HeardTimeline

__all__ = ["run_lockstep"]

RATE = 24_000
BLOCK = 480


def run_lockstep(
    samples: np.ndarray,
    *,
    scenario: Scenario,
    session: dict[str, Any],
    voice: str = "auto",
    speed: float = 4.0,
    tail_s: float = 120.0,
    on_wire: Callable[[str, str], None] | None = None,
    clock: VirtualClock | None = None,
    device_latency_s: float = 0.0,
) -> ReplayResult:
    """Run the whole replay synchronously; ``on_wire(dir, text)`` sees every frame.

    After the input ends, the replay goes on until the server and the playout are idle,
    for at most ``tail_s`` seconds. ``clock`` (virtual, starting at 0) follows the steps, so
    an event log can stamp frames with virtual time. ``device_latency_s`` models an output
    that buffers ahead: each block is handed over that long before the listener hears it,
    and a barge-in aborts what is still inside (whole blocks only).
    """
    clock = clock or VirtualClock()
    now = clock.now()
    synth, _name = make_synth(voice)
    engine = Engine(EngineConfig(pacing=Pacing(speed=speed)), scenario, synth, wall_time=0.0)
    protocol, playout = RealtimeProtocol(), PlayoutBuffer()
    core = SessionCore(protocol, playout)
    events: list[Any] = []
    wire = on_wire or (lambda _d, _t: None)

    def collect() -> None:
        for event in core.events():
            if isinstance(event, BargeIn):
                timeline.apply_cut(event.at, event.at + event.reaction_s)
            events.append(event)

    def to_client(server_events: list[dict[str, Any]]) -> None:
        supply_speech(engine, synth, now)  # voice what a new response waits for, at the instant it started
        for payload in server_events:
            text = json.dumps(payload)
            wire("in", text)
            protocol.receive(text)
            for out in protocol.events():
                core.handle(out, now)
            collect()

    def to_server() -> None:
        while frames := protocol.data_to_send():
            for text in frames:
                wire("out", text)
                to_client(engine.receive(text, now))

    to_client(engine.open())
    protocol.update_session(session)
    to_server()
    total = len(samples) + int(tail_s * RATE)
    ahead = int(round(device_latency_s * RATE / BLOCK)) * BLOCK
    timeline = HeardTimeline(total + ahead, BLOCK)
    k = 0
    while k * BLOCK < total:
        now = k * BLOCK / RATE
        clock.advance_to(now)
        to_client(engine.poll(now))
        to_server()
        if k > 0 and (k - 1) * BLOCK < len(samples):
            protocol.append_audio(np.ascontiguousarray(samples[(k - 1) * BLOCK : k * BLOCK], dtype="<i2").tobytes())
            to_server()
        playout.read_into(timeline.block(k * BLOCK + ahead, BLOCK), now + ahead / RATE)
        core.tick(now)
        collect()
        k += 1
        if k * BLOCK >= len(samples) + BLOCK and _quiet(engine, protocol, playout):
            break
    heard = timeline.samples[: max(len(samples), k * BLOCK)]
    return ReplayResult(heard, events, playout.underrun_events, playout.underrun_samples)


def _quiet(engine: Engine, protocol: RealtimeProtocol, playout: PlayoutBuffer) -> bool:
    return engine.next_due() is None and not protocol.response_in_progress and playout.queued_samples == 0
