"""A device-less output ticks its session only once the core's quiet horizon has passed, and the
session reports the same events at the same listener times as when it ticks after every pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.concurrent_levers import AlwaysOpenGate
from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.tick_gate import TickGate
from voxline.audio.wavio import read_wav
from voxline.base.clock import VirtualClock
from voxline.realtime.server import load_scenario
from voxline.session import VoiceSession
from voxline.session.replay import replay_fast

RECORDING = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"


def test_the_output_calls_after_read_only_from_the_gates_time_on() -> None:
    clock = VirtualClock()
    output = ClockedOutput(clock, origin=0.0)
    calls: list[float] = []
    output.after_read = lambda: calls.append(output.now())
    output.tick_gate = TickGate()
    for k in range(10):  # -inf: after every pass
        output._pass(k * 0.02)
    assert len(calls) == 10
    output.tick_gate.until = 0.5
    calls.clear()
    for k in range(10, 50):
        clock.advance_to(k * 0.02)
        output._pass(k * 0.02)
    assert calls and min(calls) >= 0.5 - 1e-9 and len(calls) == sum(1 for k in range(10, 50) if k * 0.02 >= 0.5 - 1e-9)


def _replay(gated: bool) -> tuple[list[Any], int, int]:
    samples, _ = read_wav(RECORDING)
    ticks = [0]
    blocks: list[ClockedOutput] = []

    def counted(session: VoiceSession) -> None:
        if not gated:
            session.machine.tick_gate = AlwaysOpenGate()
        tick = session.machine.tick

        def counting(now: float) -> Any:
            ticks[0] += 1
            return tick(now)

        session.machine.tick = counting  # type: ignore[method-assign]
        assert isinstance(session.output, ClockedOutput)
        blocks.append(session.output)

    result = replay_fast(samples, scenario=load_scenario("long"), voice="tone", tail_s=2.0, on_session=counted)
    events = [(type(e).__name__, round(getattr(e, "at", 0.0), 6)) for e in result.events]
    return events, ticks[0], blocks[0]._k


def test_a_long_reply_ticks_a_fraction_of_the_passes_and_reports_the_same() -> None:
    gated_events, gated_ticks, passes = _replay(True)
    open_events, open_ticks, open_passes = _replay(False)
    assert open_ticks >= passes - 1 and passes == open_passes  # without the gate: a tick per pass (and a final one)
    assert gated_ticks < passes / 3, (gated_ticks, passes)
    assert gated_events == open_events
    assert any(name == "BargeIn" for name, _ in gated_events)
    assert np.isfinite(passes)
