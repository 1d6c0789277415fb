"""Decode cost of one ``response.output_audio.delta``: voxline against the SDK and the floor.

Three receive paths turn the same JSON text frame into PCM bytes:

* floor   -- ``json.loads(text)`` + ``base64.b64decode(obj["delta"])``, no typing at all;
* sdk     -- what ``AsyncRealtimeConnection.recv`` of the official ``openai`` package does:
  ``parse_event`` = ``construct_type_unchecked(value=json.loads(data), type_=RealtimeServerEvent)``,
  then ``base64.b64decode(event.delta)``;
* voxline -- ``parse_server_event(text).audio`` (validated, typed, strict base64).

A fourth row, voxline with the standard library's base64, shows the cost without the
optional ``pybase64`` accelerator. Run: ``python3 -m benchmarks.bench_decode``.
"""

from __future__ import annotations

import argparse
import base64
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any, cast

from openai._models import construct_type_unchecked
from openai.types.realtime import RealtimeServerEvent

import voxline.realtime.events as ev

from .common import bare_decode, delta_frame
from .record import add_output_arguments, measure_and_report

__all__ = ["PATHS", "main", "measure", "run", "section", "table"]

SIZES = {"20ms": 480, "100ms": 2400}  # samples of PCM16 mono at 24 kHz


def _sdk(text: str) -> bytes:
    event: Any = construct_type_unchecked(value=json.loads(text), type_=cast(Any, RealtimeServerEvent))
    return base64.b64decode(event.delta)


def _voxline(text: str) -> bytes:
    event = ev.parse_server_event(text)
    assert isinstance(event, ev.ResponseOutputAudioDelta)
    return event.audio


def _voxline_stdlib_b64(text: str) -> bytes:
    event = ev.parse_server_event(text)
    assert isinstance(event, ev.ResponseOutputAudioDelta)
    return ev.decode_audio_stdlib(event.delta)


PATHS: dict[str, Callable[[str], bytes]] = {
    "floor": bare_decode,
    "sdk": _sdk,
    "voxline": _voxline,
    "voxline_stdlib_b64": _voxline_stdlib_b64,
}


def _time_us(path: Callable[[str], bytes], text: str, repetitions: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(repetitions):
        path(text)
    return (time.perf_counter_ns() - start) / repetitions / 1000.0


def measure(text: str, rounds: int, repetitions: int) -> dict[str, float]:
    """Median µs per event of every path; rounds interleave the paths so drift hits all alike."""
    expected = bare_decode(text)
    for name, path in PATHS.items():
        if path(text) != expected:
            raise AssertionError(f"path {name} decoded different bytes")
        _time_us(path, text, max(1, repetitions // 10))  # warm up
    samples: dict[str, list[float]] = {name: [] for name in PATHS}
    for _ in range(rounds):
        for name, path in PATHS.items():
            samples[name].append(_time_us(path, text, repetitions))
    return {name: statistics.median(values) for name, values in samples.items()}


def run(rounds: int = 9, repetitions: int = 4000) -> dict[str, Any]:
    """Measure every size: the figures of the ``decode`` section."""
    import openai
    import pydantic_core

    sizes: dict[str, Any] = {}
    for label, samples in SIZES.items():
        us = measure(delta_frame(samples), rounds, repetitions)
        sizes[label] = {
            "samples": samples,
            "us_per_event": {name: round(value, 3) for name, value in us.items()},
            "sdk_over_voxline": round(us["sdk"] / us["voxline"], 2),
            "voxline_over_floor": round(us["voxline"] / us["floor"], 2),
            "sdk_over_voxline_stdlib_b64": round(us["sdk"] / us["voxline_stdlib_b64"], 2),
            "voxline_stdlib_b64_over_floor": round(us["voxline_stdlib_b64"] / us["floor"], 2),
        }
    return {
        "benchmark": "decode response.output_audio.delta",
        "method": f"median of {rounds} interleaved rounds x {repetitions} events, time.perf_counter_ns",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "openai": openai.__version__,
        "pydantic_core": pydantic_core.__version__,
        "base64_backend": ev.BASE64_BACKEND,
        "goals": {"sdk_over_voxline_at_least": 10.0, "voxline_over_floor_at_most": 1.5},
        "sizes": sizes,
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``decode`` figures; ``short``: 3 rounds of 300 events (a check that it runs, not a measurement to quote)."""
    return run(3, 300) if short else run()


def table(result: dict[str, Any]) -> str:
    head = f"{'delta':>6} {'floor':>8} {'sdk':>8} {'voxline':>8} {'vox+std':>8} {'sdk/vox':>8} {'vox/floor':>9}"
    lines = [f"decode response.output_audio.delta, µs/event (base64: {result['base64_backend']})", head]
    for label, row in result["sizes"].items():
        us = row["us_per_event"]
        lines.append(
            f"{label:>6} {us['floor']:8.2f} {us['sdk']:8.2f} {us['voxline']:8.2f} {us['voxline_stdlib_b64']:8.2f}"
            f" {row['sdk_over_voxline']:7.1f}x {row['voxline_over_floor']:8.2f}x"
        )
    lines.append("vox+std = voxline decoding base64 with the standard library instead of pybase64")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repetitions", type=int, default=4000)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.rounds <= 0 or args.repetitions <= 0:
        parser.error("--rounds and --repetitions must be positive")
    measure_and_report(args, "decode", lambda: run(args.rounds, args.repetitions), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
