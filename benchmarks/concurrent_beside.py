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

The same pairing sets voxline's sessions beside openai-agents' (:func:`run_peer_at_once`), and measures a
client lever: :func:`run_levers_at_once` runs voxline's sessions with the
lever undone (:mod:`benchmarks.concurrent_levers`) and as they are, at once; run
``python3 -m benchmarks.concurrent_beside --levers-off idle_sleep`` for five such pairs and their
median ratio. Pairs run a few seconds apart move by ±15% with the host; pairs run at once by a
few percent.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import queue
import statistics
import tempfile
import time
import traceback
from collections.abc import Sequence
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.wavio import read_wav

from .concurrent_floor import run_floor
from .concurrent_peer import run_peer_on_signal
from .record import write_standalone

__all__ = ["READY_S", "main", "run_levers_at_once", "run_peer_at_once", "run_side_by_side"]

READY_S = 120.0  # how long a side may take to import, warm up and say it is ready
_MARGIN_S = 120.0  # beyond the sessions' own length, before a side that never reports counts as failed


def _voxline_side(name: str, url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, wav: bool,
                  levers_off: Sequence[str], ready: multiprocessing.Queue[Any], go: Event,
                  out: multiprocessing.Queue[Any]) -> None:
    told = False
    try:
        # imported here: this runs in a process of its own, which the concurrent benchmark's module starts
        from .bench_concurrent import WARM_UP_SAMPLES, _sessions

        asyncio.run(_sessions(1, url, samples[:WARM_UP_SAMPLES], 0.0, None))
        with tempfile.TemporaryDirectory(prefix="voxline-beside-") as tmp:
            ready.put(name)
            told = True
            go.wait()
            cpu0, began = time.process_time(), time.time()
            results, _probe = asyncio.run(_sessions(n, url, samples, tail_s, None, Path(tmp) if wav else None,
                                                    levers_off))
            cpu, ended = time.process_time() - cpu0, time.time()
        failed = [f"{type(r).__name__}: {r}"[:200] for r in results if isinstance(r, BaseException)]
        session_s = sum(r.duration_s for r in results if not isinstance(r, BaseException))
        out.put((name, {"failed": len(failed), "failures": sorted(set(failed))[:3],
                             "session_seconds": round(session_s, 2), "client_cpu_s": round(cpu, 3),
                             "began_at": round(began, 3), "ended_at": round(ended, 3),
                             "client_cpu_per_session_s": round(cpu / session_s, 5) if session_s > 0 else float("nan")}))
    except BaseException:
        if not told:  # a side that failed before its start must not keep the other waiting
            ready.put(name)
        out.put((name, {"error": traceback.format_exc(limit=3)[-600:]}))


def _peer_side(python: Path, n: int, url: str, recording: Path, run_s: float, ready: multiprocessing.Queue[Any],
               go: Event, out: multiprocessing.Queue[Any]) -> None:
    told = False

    def say_ready() -> None:
        nonlocal told
        ready.put("peer")
        told = True

    def start() -> None:
        go.wait()

    try:
        out.put(("peer", run_peer_on_signal(python, n, url, recording, run_s, say_ready, start)))
    except BaseException:
        if not told:
            ready.put("peer")
        out.put(("peer", {"error": traceback.format_exc(limit=3)[-600:]}))


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


def _at_once(sides: Sequence[multiprocessing.process.BaseProcess], ready: multiprocessing.Queue[Any], go: Event,
             out: multiprocessing.Queue[Any], run_s: float) -> tuple[dict[str, dict[str, Any]], float]:
    """Start ``sides``, give the start signal once each is ready; each side's report by its name, and the wall time."""
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
    return reports, wall


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
    sides = [spawn.Process(target=_voxline_side,
                           args=("voxline", url, n, samples, tail_s, wav, tuple(levers_off), ready, go, out)),
             spawn.Process(target=_floor_side, args=(url, n, samples, run_s, ready, go, out))]
    reports, wall = _at_once(sides, ready, go, out, run_s)
    mine, floor = reports["voxline"], reports["floor"]
    return {
        "sessions": n,
        "wall_s": round(wall, 2),
        "voxline": mine,
        "floor": floor,
        "voxline_ratio": round(mine["client_cpu_per_session_s"] / floor["client_cpu_per_session_s"], 2),
    }


def run_peer_at_once(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, python: Path, recording: Path,
                     *, wav: bool = True) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` openai-agents sessions (:mod:`benchmarks.concurrent_peer`, in the
    interpreter ``python``, streaming ``recording``, whose samples ``samples`` are) at once against ``url``; each
    side's figures and voxline's CPU per session as a ratio to openai-agents'."""
    run_s = round(len(samples) / 24_000 + tail_s, 2)
    spawn = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = spawn.Queue()
    out: multiprocessing.Queue[Any] = spawn.Queue()
    go = spawn.Event()
    sides = [spawn.Process(target=_voxline_side, args=("voxline", url, n, samples, tail_s, wav, (), ready, go, out)),
             spawn.Process(target=_peer_side, args=(python, n, url, recording, run_s, ready, go, out))]
    reports, wall = _at_once(sides, ready, go, out, run_s)
    mine, theirs = reports["voxline"], reports["peer"]
    return {
        "sessions": n,
        "wall_s": round(wall, 2),
        "voxline": mine,
        "peer": theirs,
        "voxline_ratio": round(mine["client_cpu_per_session_s"] / theirs["client_cpu_per_session_s"], 2),
    }


def run_levers_at_once(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, levers_off: Sequence[str],
                       *, wav: bool = True) -> dict[str, Any]:
    """``n`` voxline sessions with the levers in ``levers_off`` undone (the former path) and ``n`` as they are (the
    new), at once, each side in its own process against ``url``; the new side's CPU per session over the former's."""
    spawn = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = spawn.Queue()
    out: multiprocessing.Queue[Any] = spawn.Queue()
    go = spawn.Event()
    sides = [spawn.Process(target=_voxline_side,
                           args=("former", url, n, samples, tail_s, wav, tuple(levers_off), ready, go, out)),
             spawn.Process(target=_voxline_side, args=("new", url, n, samples, tail_s, wav, (), ready, go, out))]
    reports, wall = _at_once(sides, ready, go, out, round(len(samples) / 24_000 + tail_s, 2))
    former, new = reports["former"], reports["new"]
    return {
        "sessions": n,
        "levers_off": list(levers_off),
        "wall_s": round(wall, 2),
        "former": former,
        "new": new,
        "new_over_former": round(new["client_cpu_per_session_s"] / former["client_cpu_per_session_s"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    """``python3 -m benchmarks.concurrent_beside --levers-off idle_sleep``: pairs of runs, the former path and the new
    at once; each pair's ratio and their median."""
    from .bench_concurrent import RECORDING, TAIL_S, Server, Workload
    from .concurrent_levers import LEVERS

    parser = argparse.ArgumentParser(description="A client lever measured with its former and new path at once")
    parser.add_argument("--levers-off", required=True, metavar="NAME,...", help=f"levers to undo: {', '.join(LEVERS)}")
    parser.add_argument("--sessions", type=int, default=50, metavar="N", help="sessions on each side (default 50)")
    parser.add_argument("--repeat", type=int, default=5, metavar="R", help="pairs of runs (default 5)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE", help="the pairs' figures as JSON")
    args = parser.parse_args(argv)
    off = tuple(name for name in args.levers_off.split(",") if name)
    if not off or set(off) - set(LEVERS):
        parser.error(f"--levers-off takes some of {', '.join(LEVERS)}, not {args.levers_off!r}")
    if not 1 <= args.sessions <= 2000 or args.repeat < 1:
        parser.error("--sessions takes 1..2000 and --repeat at least 1")
    workload = Workload().resolved()
    samples, _rate = read_wav(RECORDING)
    pairs = []
    for k in range(args.repeat):
        with Server(workload=workload) as server:
            pair = run_levers_at_once(server.url, args.sessions, samples, TAIL_S, off, wav=workload.wav)
        pairs.append(pair)
        print(f"pair {k + 1}: former {100 * pair['former']['client_cpu_per_session_s']:.3f}%, new "
              f"{100 * pair['new']['client_cpu_per_session_s']:.3f}% of a core per session; new / former "
              f"{pair['new_over_former']}", flush=True)
    ratios = [p["new_over_former"] for p in pairs]
    print(f"new / former: median {statistics.median(ratios)}, {min(ratios)}-{max(ratios)}, lower in "
          f"{sum(r < 1 for r in ratios)} of {len(ratios)}")
    if args.out is not None:
        write_standalone(args.out, {"benchmark": "levers_at_once", "pairs": pairs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
