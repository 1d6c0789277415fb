"""Helpers shared by the benchmarks: missing programs, error statistics, timing, plain-text tables.

Where figures are written is :mod:`benchmarks.record`'s business."""

from __future__ import annotations

import base64
import gc
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "MissingToolError",
    "Unavailable",
    "bare_decode",
    "delta_frame",
    "environment",
    "format_table",
    "peak_rss_run",
    "ratio",
    "require_tools",
    "speechlike",
    "stats",
    "time_regions",
]


def delta_frame(samples: int) -> str:
    """A ``response.output_audio.delta`` frame shaped like the service's (``type`` first, ids, then the base64
    delta) carrying ``samples`` samples of PCM16 (random bytes, the same for the same count)."""
    pcm = random.Random(samples).randbytes(samples * 2)
    return json.dumps(
        {
            "type": "response.output_audio.delta",
            "event_id": "event_CbHpVXa3mAp6JQm0bxKcG",
            "response_id": "resp_CbHpVr3EBbbqBjDcTNy3c",
            "item_id": "item_CbHpVjJ4IkvxnmcGHLT7x",
            "output_index": 0,
            "content_index": 0,
            "delta": base64.b64encode(pcm).decode("ascii"),
        },
        separators=(",", ":"),
    )


def bare_decode(text: str) -> bytes:
    """The least decoding of an audio delta: ``json.loads`` and the standard library's base64, no typing."""
    return base64.b64decode(json.loads(text)["delta"])


class Unavailable(RuntimeError):
    """Something a benchmark needs is not on this machine; its section is recorded as skipped, with this reason."""


class MissingToolError(Unavailable):
    """An external program a benchmark needs (espeak-ng, sox) is not installed."""


def require_tools(*names: str) -> None:
    """Raise :class:`MissingToolError` naming every program in ``names`` missing from ``PATH``."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        raise MissingToolError(f"this benchmark needs {', '.join(missing)} on PATH (sudo apt-get install espeak-ng sox)")


def environment() -> dict[str, str]:
    """Versions that matter for reading the figures."""
    import numpy
    import openai
    import pydantic_core
    import soxr

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "numpy": numpy.__version__,
        "soxr": soxr.__version__,
        "openai": openai.__version__,
        "pydantic_core": pydantic_core.__version__,
    }


def speechlike(n: int, rate: int, *, seed: int) -> np.ndarray:
    """``n`` samples of a deterministic speech-like int16 signal: harmonics, a syllable envelope, noise."""
    t = np.arange(n) / rate
    tone = sum(np.sin(2 * np.pi * 130 * k * t) / k for k in range(1, 7))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    noise = np.random.default_rng(seed).normal(0, 200, n)
    return np.clip(3000 * tone * envelope + noise, -32768, 32767).astype(np.int16)


def stats(values: Sequence[float]) -> dict[str, float | int]:
    """``max``, ``median`` and ``mean`` of absolute errors (ms), rounded to 0.01 ms."""
    if not values:
        return {"n": 0, "max_ms": 0.0, "median_ms": 0.0, "mean_ms": 0.0}
    return {
        "n": len(values),
        "max_ms": round(max(values), 2),
        "median_ms": round(statistics.median(values), 2),
        "mean_ms": round(statistics.fmean(values), 2),
    }


def format_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned others, widths fitted to the content."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        first = str(cells[0]).ljust(widths[0])
        return "  ".join([first, *(str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    return "\n".join([line(head), *(line(r) for r in rows)])


def ratio(a: float, b: float, digits: int = 2) -> float:
    """``a / b`` rounded to ``digits`` decimals (NaN when ``b`` is not positive, or either is NaN)."""
    return round(a / b, digits) if b > 0 else float("nan")


def time_regions(regions: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[float, float]]:
    """Median (CPU ns, wall ns) of each region over ``rounds``; rounds interleave the regions.

    CPU time is ``time.process_time_ns`` (this process, all threads), wall time
    ``time.perf_counter_ns``. Each region runs once untimed first, and the garbage
    collector runs before each timed call so one region's garbage is not billed to the next.
    """
    for region in regions.values():
        region()
    samples: dict[str, list[tuple[int, int]]] = {name: [] for name in regions}
    for _ in range(rounds):
        for name, region in regions.items():
            gc.collect()
            cpu, wall = time.process_time_ns(), time.perf_counter_ns()
            region()
            samples[name].append((time.process_time_ns() - cpu, time.perf_counter_ns() - wall))
    return {
        name: (statistics.median(c for c, _w in v), statistics.median(w for _c, w in v)) for name, v in samples.items()
    }


# The command runs under a small Python process that reports its child's rusage: a process forked
# from a large one (a test runner, a benchmark that opened hundreds of sessions) carries that
# parent's resident high-water mark into its own ru_maxrss across exec.
_RUSAGE = """
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    json.dump([usage.ru_maxrss, usage.ru_utime + usage.ru_stime], out)
sys.exit(code)
"""


def peak_rss_run(args: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """Run ``args``: the finished process, the peak resident set it reached (KiB) and its CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="voxline-rusage-") as tmp:
        report = Path(tmp) / "rusage.json"
        done = subprocess.run([sys.executable, "-c", _RUSAGE, str(report), *args], cwd=cwd,
                              env=env if env is not None else dict(os.environ), capture_output=True, text=True,
                              timeout=timeout)
        peak_kib, cpu_s = json.loads(report.read_text())
    return done, int(peak_kib), float(cpu_s)
