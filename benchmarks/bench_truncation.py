"""Truncation error at barge-in: what ``conversation.item.truncate`` says against what was heard.

Each position is one lockstep replay (``voxline replay --fast``) of the built-in ``long``
scenario with the espeak voice: a spoken question, the assistant's long reply, and a
spoken "stop" placed so that the server's VAD detects it a chosen time after the first
reply sample reached the listener. On the same run we compare, in ms of the reply:

* **truth** -- the reply's audio found in the heard timeline by analysing the samples
  (:func:`tests.support.heard.heard_length`). Inside a stretch of digital silence of the reply
  the samples cannot tell where the cut was, so the truth is an interval: from just after
  the last non-zero reply sample heard to the length ``heard_length`` reports;
* **ledger** -- the ``audio_end_ms`` voxline sent in ``conversation.item.truncate``
  (0 for an item it deleted);
* **wall clock** -- barge-in time minus the arrival of the item's first
  ``response.output_audio.delta`` (virtual timestamps of the wire log), capped at the
  audio received;
* **handed to device** -- heard plus what the output had already taken (``in_device_ms``),
  capped at the audio received.

The error of a method is its distance to the truth interval. Output models: the WAV sink
(no output latency), devices that buffer 40 and 100 ms ahead, and the WAV sink fed by a
server slower than real time (playout keeps running dry).

The device rows are *modelled*: :class:`~voxline.audio.clocked_output.ClockedOutput` hands each block
over ``device_latency_s`` before the listener hears it, and the ledger is told the same
latency, so they show what ignoring a device buffer costs, not how a real device behaves. Real
devices are measured by ``benchmarks/bench_device.py`` (PulseAudio's virtual speaker, the
recording analysed on its own). Run: ``python3 -m benchmarks.bench_truncation``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from voxline.base.clock import VirtualClock
from voxline.audio.synth import synthesize
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.events import AssistantAudioStarted, BargeIn, SpeechStarted
from voxline.session.replay import ReplayResult, replay_fast
from voxline.session.settings import SessionSettings
from tests.support.heard import heard_length
from tests.support.speech import make_utterance, mix_timeline

from .common import environment, format_table, require_tools, stats
from .record import add_output_arguments, finish, run_section

__all__ = ["METHODS", "Case", "Fixtures", "default_cases", "heard_interval", "main", "make_fixtures",
           "measure_position", "reply_timing", "run", "section", "short_cases", "spread_offsets", "summarize", "table"]

RATE = 24_000
SCENARIO = load_scenario("long")
QUESTION, STOP = "what is the weather like today", "stop, wait a second"
QUESTION_AT = 0.5
METHODS = ("ledger", "wall_clock", "handed_to_device")
Frame = tuple[float, str, str]  # (virtual time, "in" | "out", JSON text) as seen on the wire


@dataclass(frozen=True)
class Case:
    """One output model: how far the device buffers ahead, how fast the server streams."""

    name: str
    label: str
    device_latency_s: float
    speed: float
    offsets: tuple[float, ...]  # seconds after the first reply sample was heard

    @property
    def modelled(self) -> bool:
        """The device latency is the output model's, not a measured device's."""
        return self.device_latency_s > 0


@dataclass(frozen=True, eq=False)
class Fixtures:
    question: np.ndarray
    stop: np.ndarray
    reply: np.ndarray  # the scenario's reply exactly as the server synthesises it
    timing: dict[tuple[float, float], tuple[float, float]] = field(default_factory=dict)


def spread_offsets(n: int, last_s: float = 12.0) -> tuple[float, ...]:
    """``n`` offsets: every 20 ms from 30 ms for the first ten, then evenly up to ``last_s``."""
    early = [0.03 + 0.02 * i for i in range(min(10, n))]
    rest = np.linspace(0.25, last_s, n - len(early)).tolist() if n > len(early) else []
    return tuple(round(x, 3) for x in [*early, *rest])


def _even(first: float, step: float, n: int) -> tuple[float, ...]:
    return tuple(round(first + step * i, 3) for i in range(n))


def default_cases(positions: int = 60) -> list[Case]:
    """The output models of the report; the starved ones use fewer, denser positions."""
    spread = spread_offsets(positions)
    return [
        Case("wav", "WAV sink", 0.0, 4.0, spread),
        Case("device_40ms", "device, 40 ms ahead (modelled)", 0.04, 4.0, spread),
        Case("device_100ms", "device, 100 ms ahead (modelled)", 0.1, 4.0, spread),
        Case("wav_starved_x0.5", "WAV sink, server 0.5x", 0.0, 0.5, _even(0.3, 0.155, 24)),
        Case("wav_starved_x0.8", "WAV sink, server 0.8x", 0.0, 0.8, _even(0.45, 0.37, 10)),
    ]


def short_cases() -> list[Case]:
    """Every output model of :func:`default_cases` at two or three positions (a check that it runs)."""
    return [replace(case, offsets=case.offsets[:: max(1, len(case.offsets) // 2)][:3]) for case in default_cases(12)]


def make_fixtures(cache: Path) -> Fixtures:
    """Speech fixtures (espeak-ng + sox, deterministic) and the reply's reference samples."""
    require_tools("espeak-ng", "sox")
    reply = synthesize(SCENARIO.turns[0].outputs[0].text, "espeak")
    return Fixtures(make_utterance(QUESTION, cache).samples, make_utterance(STOP, cache).samples, reply)


SETTINGS = SessionSettings(api_key="local", input_chunk_ms=20)
"""The microphone goes out block by block, so each "stop" reaches the server's VAD where it was placed."""


def _replay(fx: Fixtures, case: Case, parts: list[tuple[float, np.ndarray]], total_s: float,
            wire: list[Frame] | None = None) -> ReplayResult:
    clock = VirtualClock()
    log = wire if wire is not None else []
    return replay_fast(
        mix_timeline(total_s, parts), scenario=SCENARIO, voice="espeak", speed=case.speed,
        tail_s=1.0, clock=clock, device_latency_s=case.device_latency_s,
        on_wire=lambda d, text: log.append((clock.now(), d, text)),
        settings=SETTINGS,
    )


def reply_timing(fx: Fixtures, case: Case) -> tuple[float, float]:
    """(listener time of the first reply sample, server VAD detection delay), from a run without "stop"."""
    key = (case.speed, case.device_latency_s)
    if key not in fx.timing:
        result = _replay(fx, case, [(QUESTION_AT, fx.question)], 6.0)
        first = next(e.at for e in result.events if isinstance(e, AssistantAudioStarted))
        detected = next(e.at for e in result.events if isinstance(e, SpeechStarted))
        fx.timing[key] = (first, detected - QUESTION_AT)
    return fx.timing[key]


def heard_interval(heard: np.ndarray, reply: np.ndarray, at: float) -> tuple[float, float]:
    """(lowest, highest) ms of ``reply`` consistent with the heard samples up to just after ``at``."""
    onset, n = heard_length(heard[: int(round((at + 0.5) * RATE))], reply)
    if onset < 0:
        return 0.0, 0.0
    loud = np.flatnonzero(reply[:n])
    low = int(loud[-1]) + 1 if len(loud) else 0
    return low * 1000 / RATE, n * 1000 / RATE


def _wire_events(wire: Iterable[Frame], direction: str, kinds: tuple[str, ...]) -> Iterator[tuple[float, Any]]:
    """(time, event) of the frames in ``direction`` whose type is one of ``kinds``."""
    for t, d, text in wire:
        if d == direction and any(f'"{kind}"' in text for kind in kinds):
            yield t, json.loads(text)


def _sent_value(wire: list[Frame], barge: BargeIn) -> tuple[str, float]:
    """What the conversation keeps of the item after the barge-in, from the frames sent."""
    for _t, event in _wire_events(wire, "out", ("conversation.item.truncate", "conversation.item.delete")):
        if event.get("item_id") == barge.item_id:
            if event["type"] == "conversation.item.truncate":
                return "truncate", float(event["audio_end_ms"])
            return "delete", 0.0
    return "none", barge.received_ms


def _first_delta_at(wire: list[Frame], item_id: str) -> float:
    for t, event in _wire_events(wire, "in", ("response.output_audio.delta",)):
        if event.get("item_id") == item_id:
            return t
    raise RuntimeError(f"no response.output_audio.delta for {item_id} on the wire")


def _error(value: float, low: float, high: float) -> float:
    return max(0.0, low - value, value - high)


def measure_position(fx: Fixtures, case: Case, offset: float) -> dict[str, Any]:
    """One replay interrupted ``offset`` s after the first heard reply sample; every method's value and error."""
    first, delay = reply_timing(fx, case)
    when = first + offset
    wire: list[Frame] = []
    result = _replay(fx, case, [(QUESTION_AT, fx.question), (when - delay, fx.stop)], when + 0.5, wire)
    barges = result.barge_ins
    if len(barges) != 1 or barges[0].item_id is None:
        raise RuntimeError(f"{case.name} at +{offset:.3f} s: expected one barge-in on the reply, got {barges}")
    barge = barges[0]
    assert barge.item_id is not None
    action, ledger = _sent_value(wire, barge)
    wall = min((barge.at - _first_delta_at(wire, barge.item_id)) * 1000, barge.received_ms)
    handed = min(barge.heard_ms + barge.in_device_ms, barge.received_ms)
    low, high = heard_interval(result.heard, fx.reply, barge.at)
    values = {"ledger": ledger, "wall_clock": wall, "handed_to_device": handed}
    return {
        "case": case.name,
        "offset_s": round(barge.at - first, 4),
        "action": action,
        "received_ms": round(barge.received_ms, 3),
        "truth_ms": [round(low, 3), round(high, 3)],
        "starved": barge.unplayed_ms == 0 and barge.received_ms < len(fx.reply) * 1000 / RATE,
        "in_device_ms": round(barge.in_device_ms, 3),
        "values_ms": {m: round(v, 3) for m, v in values.items()},
        "errors_ms": {m: round(_error(v, low, high), 3) for m, v in values.items()},
        "errors_vs_heard_length_ms": {m: round(abs(v - high), 3) for m, v in values.items()},
    }


def summarize(case: Case, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Error statistics of every method for one output model."""
    return {
        "label": case.label,
        "device_latency_s": case.device_latency_s,
        "device_latency": "modelled" if case.modelled else "none",
        "server_speed": case.speed,
        "runs": len(rows),
        "starved_runs": sum(r["starved"] for r in rows),
        "ambiguous_truth_runs": sum(r["truth_ms"][1] - r["truth_ms"][0] > 1.0 for r in rows),
        "deleted": sum(r["action"] == "delete" for r in rows),
        "offsets_s": [min(r["offset_s"] for r in rows), max(r["offset_s"] for r in rows)] if rows else [],
        "error_ms": {m: stats([r["errors_ms"][m] for r in rows]) for m in METHODS},
        "error_vs_heard_length_ms": {m: stats([r["errors_vs_heard_length_ms"][m] for r in rows]) for m in METHODS},
    }


def run(cases: list[Case] | None = None, fixtures: Fixtures | None = None) -> dict[str, Any]:
    """Measure every case: the figures of the ``truncation`` section."""
    cases = default_cases() if cases is None else cases
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="voxline-bench-") as tmp:
        fx = fixtures or make_fixtures(Path(tmp))
        rows = {case.name: [measure_position(fx, case, offset) for offset in case.offsets] for case in cases}
    return {
        "benchmark": "truncation error at barge-in",
        "method": "lockstep replay of scenario 'long' (espeak voice), server VAD barge-in; "
                  "error = distance to the interval of reply lengths consistent with the heard samples",
        "environment": environment(),
        "reply_ms": round(len(fx.reply) * 1000 / RATE, 3),
        "goal": {"ledger_max_error_ms_wav_sink": 10.0},
        "elapsed_s": round(time.perf_counter() - start, 1),
        "cases": {case.name: summarize(case, rows[case.name]) for case in cases},
        "runs": [row for case in cases for row in rows[case.name]],
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``truncation`` figures; ``short``: :func:`short_cases`."""
    return run(short_cases() if short else default_cases())


def table(result: dict[str, Any]) -> str:
    """The summary as text: max / median absolute error per method and output model."""
    head = ["output", "runs", "dry", "ledger max/med", "wall clock max/med", "handed max/med"]
    lines = []
    for summary in result["cases"].values():
        cells = [f"{e['max_ms']:.1f} / {e['median_ms']:.1f}" for e in (summary["error_ms"][m] for m in METHODS)]
        lines.append([summary["label"], str(summary["runs"]), str(summary["starved_runs"]), *cells])
    ambiguous = sum(s["ambiguous_truth_runs"] for s in result["cases"].values())
    return "\n".join([
        f"truncation error at barge-in, ms of a {result['reply_ms']:.0f} ms reply (|method - heard|, max / median)",
        format_table(head, lines),
        "dry = barge-ins while the playout had run dry (underrun gap); wall clock = since the first delta, "
        "capped at received; handed = heard + still in the device, capped at received; "
        "(modelled) = the output model's device latency, not a real device (bench_device measures those)",
        f"{ambiguous} runs were cut inside digital silence of the reply, where the truth is an interval",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--positions", type=int, default=60, help="barge-in positions per non-starved output model")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.positions <= 0:
        parser.error("--positions must be positive")
    done = run_section(lambda: run(default_cases(args.positions)), short=False)
    if "skipped" in done:
        print(f"bench_truncation: {done['skipped']}")
        return 2
    result = done["figures"]
    print(table(result))
    print(f"{len(result['runs'])} replays in {result['elapsed_s']} s; written to {finish(args, 'truncation', done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
