"""Encode cost of one ``input_audio_buffer.append``: voxline against the standard library and the SDK.

Three send paths turn the same PCM block into the JSON text frame that goes on the wire:

* stdlib  -- ``json.dumps`` of the event with ``base64.b64encode`` of the audio (the floor);
* sdk     -- what ``connection.input_audio_buffer.append(audio=...)`` of the official ``openai``
  package serialises: ``maybe_transform`` over the client-event union, then ``json.dumps``;
* voxline -- :meth:`RealtimeProtocol.append_audio` + :meth:`RealtimeProtocol.data_to_send`
  (an ``event_id`` on each frame, as every client frame of voxline has).

The three must carry the same base64 audio. Run: ``python3 -m benchmarks.bench_encode``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import voxline.realtime.events as ev

from .bench_duplex import append_sdk_send, append_stdlib, voxline_appender
from .record import add_output_arguments, measure_and_report

__all__ = ["main", "measure", "run", "section"]

SIZES = {"20ms": 480, "100ms": 2400}  # samples of PCM16 mono at 24 kHz


def _paths() -> dict[str, Callable[[bytes], str]]:
    append = voxline_appender()

    def voxline(pcm: bytes) -> str:
        (text,) = append(pcm)
        return text

    return {"stdlib": append_stdlib, "sdk": append_sdk_send, "voxline": voxline}


def _time_us(path: Callable[[bytes], str], pcm: bytes, repetitions: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(repetitions):
        path(pcm)
    return (time.perf_counter_ns() - start) / repetitions / 1000.0


def measure(pcm: bytes, rounds: int, repetitions: int) -> dict[str, float]:
    """Median µs per frame of every path; rounds interleave the paths so drift hits all alike."""
    paths = _paths()
    payloads = {name: json.loads(path(pcm))["audio"] for name, path in paths.items()}
    if len(set(payloads.values())) != 1:
        raise AssertionError(f"the encode paths disagree: {sorted(payloads)}")
    for path in paths.values():
        _time_us(path, pcm, max(1, repetitions // 10))  # warm up
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            samples[name].append(_time_us(path, pcm, repetitions))
    return {name: statistics.median(values) for name, values in samples.items()}


def run(rounds: int = 9, repetitions: int = 4000) -> dict[str, Any]:
    """Measure every size: the figures of the ``encode`` section."""
    sizes: dict[str, Any] = {}
    for label, n in SIZES.items():
        us = measure(random.Random(n).randbytes(n * 2), rounds, repetitions)
        sizes[label] = {
            "samples": n,
            "us_per_frame": {name: round(value, 3) for name, value in us.items()},
            "stdlib_over_voxline": round(us["stdlib"] / us["voxline"], 2),
            "sdk_over_voxline": round(us["sdk"] / us["voxline"], 2),
        }
    return {
        "benchmark": "encode input_audio_buffer.append",
        "method": f"median of {rounds} interleaved rounds x {repetitions} frames, time.perf_counter_ns",
        "base64_backend": ev.BASE64_BACKEND,
        "sizes": sizes,
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``encode`` figures; ``short``: 3 rounds of 300 frames."""
    return run(3, 300) if short else run()


def table(result: dict[str, Any]) -> str:
    lines = [f"encode input_audio_buffer.append, µs/frame (base64: {result['base64_backend']})",
             f"{'block':>6} {'stdlib':>8} {'sdk':>8} {'voxline':>8} {'std/vox':>8} {'sdk/vox':>8}"]
    for label, row in result["sizes"].items():
        us = row["us_per_frame"]
        lines.append(f"{label:>6} {us['stdlib']:8.2f} {us['sdk']:8.2f} {us['voxline']:8.2f}"
                     f" {row['stdlib_over_voxline']:7.2f}x {row['sdk_over_voxline']:7.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repetitions", type=int, default=4000)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.rounds <= 0 or args.repetitions <= 0:
        parser.error("--rounds and --repetitions must be positive")
    measure_and_report(args, "encode", lambda: run(args.rounds, args.repetitions), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
