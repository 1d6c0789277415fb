"""voxline's sessions and the bare receivers at the same time: the floor ratio on one stretch of the host's time.

A shared host's speed drifts by tens of percent within a minute (other tenants' work on the
same cores and caches). Measured one after the other, even just before and just after, the
floor and voxline's sessions see different hosts, and their ratio moves with the drift. Here
both clients run at once, each in its own process against the same server, from one start
signal given once both are ready: whatever the host does during those seconds, it does to both.

Each side is a fresh ``spawn`` process: voxline's side opens one short session first (what a
process does once is not a cost of the N sessions), then N sessions as the concurrent
benchmark runs them (heard WAVs written when the workload says so); the floor's side runs N
bare receivers (:func:`benchmarks.concurrent_floor.run_floor`) for as long as a session lasts.
Each reports its own ``time.process_time`` over its sessions' seconds, and when its sessions began
and ended (Unix seconds), which shows they shared the same stretch.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import tempfile
import time
import traceback
from collections.abc import Sequence
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .concurrent_floor import run_floor

__all__ = ["READY_S", "run_side_by_side"]

READY_S = 120.0  # how long a side may take to import, warm up and say it is ready
_MARGIN_S = 120.0  # beyond the sessions' own length, before a side that never reports counts as failed


def _voxline_side(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, wav: bool,
                  levers_off: Sequence[str], ready: multiprocessing.Queue[Any], go: Event,
                  out: multiprocessing.Queue[Any]) -> None:
    try:
        # imported here: this runs in a process of its own, which the concurrent benchmark's module starts
        from .bench_concurrent import WARM_UP_SAMPLES, _sessions

        asyncio.run(_sessions(1, url, samples[:WARM_UP_SAMPLES], 0.0, None))
        with tempfile.TemporaryDirectory(prefix="voxline-beside-") as tmp:
            ready.put("voxline")
            go.wait()
            cpu0, began = time.process_time(), time.time()
            results, _probe = asyncio.run(_sessions(n, url, samples, tail_s, None, Path(tmp) if wav else None,
                                                    levers_off))
            cpu, ended = time.process_time() - cpu0, time.time()
        failed = [f"{type(r).__name__}: {r}"[:200] for r in results if isinstance(r, BaseException)]
        session_s = sum(r.duration_s for r in results if not isinstance(r, BaseException))
        out.put(("voxline", {"failed": len(failed), "failures": sorted(set(failed))[:3],
                             "session_seconds": round(session_s, 2), "client_cpu_s": round(cpu, 3),
                             "began_at": round(began, 3), "ended_at": round(ended, 3),
                             "client_cpu_per_session_s": round(cpu / session_s, 5) if session_s > 0 else float("nan")}))
    except BaseException:
        ready.put("voxline")  # a side that failed before its start must not keep the other waiting
        out.put(("voxline", {"error": traceback.format_exc(limit=3)[-600:]}))


def _floor_side(url: str, n: int, samples: npt.NDArray[np.int16], run_s: float, ready: multiprocessing.Queue[Any],
                go: Event, out: multiprocessing.Queue[Any]) -> None:
    try:
        ready.put("floor")
        go.wait()
        began = time.time()
        figures = run_floor(n, url, samples, run_s)
        out.put(("floor", {**figures, "began_at": round(began, 3), "ended_at": round(time.time(), 3)}))
    except BaseException:
        out.put(("floor", {"error": traceback.format_exc(limit=3)[-600:]}))


def run_side_by_side(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, *, wav: bool = True,
                     levers_off: Sequence[str] = ()) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` bare receivers against ``url`` at once, each client in its own process;
    each side's figures and voxline's CPU per session as a ratio to the bare receivers'.

    Raises ``RuntimeError`` when a side does not get ready or does not report in time, or reports an error.
    """
    run_s = round(len(samples) / 24_000 + tail_s, 2)  # a bare receiver runs as long as a session lasts
    spawn = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = spawn.Queue()
    out: multiprocessing.Queue[Any] = spawn.Queue()
    go = spawn.Event()
    sides = [spawn.Process(target=_voxline_side, args=(url, n, samples, tail_s, wav, tuple(levers_off), ready, go, out)),
             spawn.Process(target=_floor_side, args=(url, n, samples, run_s, ready, go, out))]
    for side in sides:
        side.start()
    try:
        try:
            for _ in sides:
                ready.get(timeout=READY_S)
            go.set()
            wall0 = time.perf_counter()
            reports = dict(out.get(timeout=run_s + _MARGIN_S) for _ in sides)
        except queue.Empty:
            raise RuntimeError("a side of the side-by-side run did not report in time") from None
        wall = time.perf_counter() - wall0
    finally:
        for side in sides:
            side.join(timeout=10.0)
            if side.is_alive():
                side.kill()
                side.join()
    errors = [f"{name}: {report['error']}" for name, report in sorted(reports.items()) if "error" in report]
    if errors:
        raise RuntimeError("the side-by-side run failed: " + " | ".join(errors))
    mine, floor = reports["voxline"], reports["floor"]
    return {
        "sessions": n,
        "wall_s": round(wall, 2),
        "voxline": mine,
        "floor": floor,
        "voxline_ratio": round(mine["client_cpu_per_session_s"] / floor["client_cpu_per_session_s"], 2),
    }
