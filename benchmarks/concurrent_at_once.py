"""Two clients at the same time: a CPU ratio taken on one stretch of the host's time.

A shared host's speed drifts within a minute (other tenants' work on the same cores and
caches): in one run of the concurrent benchmark the host took 65 ms for its fixed piece of work
before and 44 ms after, and the bare receivers run just before and just after one round of
voxline's sessions cost 0.53% and 0.44% of a core per session. Measured one after the other, two
clients see different hosts, and their ratio moves with the drift. Here both run at once, each
in its own process against the same server, from one start signal given once both are ready:
whatever the host does during those seconds, it does to both. What the two clients do to each
other does not cancel out so: they share the cores and the caches, and one may feel it more (in
one run voxline's client cost 0.67–0.70% of a core per session alone, 0.76–0.83% beside the bare
receivers, whose own cost did not move). Two voxline clients, a lever's former and new path,
share the machine alike, which is where a pair run at once measures best.

Each side is a fresh ``spawn`` process that first does what a process does once (voxline's side
one short session, the bare receivers' one short receiver), says it is ready, waits for the
signal, then runs N sessions as the concurrent benchmark does (voxline's write their heard WAVs
when the workload says so, into a folder the caller owns). Each reports its own
``time.process_time`` over its sessions' seconds, and when its sessions began and ended (Unix
seconds), which shows they shared the same stretch. voxline's side also runs the benchmark's
loop-lag probe (a timer every 10 ms), as in the table's runs.

Pairs: voxline beside the bare receivers (:func:`run_side_by_side`), beside openai-agents'
sessions (:func:`run_peer_at_once`), and a client lever's former path beside its new one
(:func:`run_levers_at_once`; ``python3 -m benchmarks.concurrent_at_once --levers-off idle_sleep``
runs five such pairs and prints their median ratio). The idle lever's pairs run a few seconds
apart ranged 0.74–1.13; run at once, 0.96–0.98.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.wavio import read_wav

from .common import ratio
from .concurrent_floor import run_floor
from .concurrent_peer import run_peer_on_signal
from .concurrent_sessions import (
    RECORDING,
    TAIL_S,
    WARM_UP_SAMPLES,
    Server,
    Workload,
    failure,
    run_on_command_loop,
    run_seconds,
    voxline_sessions,
)
from .record import write_standalone

__all__ = ["READY_S", "at_once", "main", "report_failure", "run_levers_at_once", "run_peer_at_once", "run_side_by_side"]

READY_S = 120.0  # how long a side may take to import, warm up and say it is ready
_MARGIN_S = 120.0  # beyond the sessions' own length, before a side that never reports counts as failed
_POLL_S = 0.5  # how often the caller looks for a side that ended without a word


def report_failure(name: str, ready: multiprocessing.Queue[Any], told: bool, out: multiprocessing.Queue[Any]) -> None:
    """Report the exception being handled in one line (what it said, and where it was raised), and say not ready if
    ready was not said yet (the pair then stops)."""
    if not told:
        ready.put((name, False))
    caught = traceback.TracebackException(*sys.exc_info())
    where = (f" (at {Path(caught.stack[-1].filename).name}:{caught.stack[-1].lineno} in {caught.stack[-1].name})"
             if caught.stack else "")
    said = " ".join("".join(caught.format_exception_only()).split())
    out.put((name, {"error": f"{said[:400]}{where}"}))


def _voxline_side(name: str, url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, wav_dir: str | None,
                  levers_off: Sequence[str], ready: multiprocessing.Queue[Any], go: Event,
                  out: multiprocessing.Queue[Any]) -> None:
    told = False
    try:
        run_on_command_loop(voxline_sessions(1, url, samples[:WARM_UP_SAMPLES], 0.0, None, None, levers_off))
        ready.put((name, True))
        told = True
        if not go.wait(READY_S):
            raise RuntimeError("no start signal came")
        cpu0, began = time.process_time(), time.time()
        results, _probe = run_on_command_loop(voxline_sessions(n, url, samples, tail_s, None,
                                                               None if wav_dir is None else Path(wav_dir), levers_off))
        cpu, ended = time.process_time() - cpu0, time.time()
        failed = [why for why in map(failure, results) if why is not None]
        session_s = sum(r.duration_s for r in results if not isinstance(r, BaseException))
        out.put((name, {"failed": len(failed), "failures": sorted(set(failed))[:3], "levers_off": list(levers_off),
                        "session_seconds": round(session_s, 2), "client_cpu_s": round(cpu, 3),
                        "began_at": round(began, 3), "ended_at": round(ended, 3),
                        "client_cpu_per_session_s": ratio(cpu, session_s, 5)}))
    except BaseException:
        report_failure(name, ready, told, out)


def _bare_side(url: str, n: int, samples: npt.NDArray[np.int16], run_s: float, ready: multiprocessing.Queue[Any],
               go: Event, out: multiprocessing.Queue[Any]) -> None:
    told = False
    try:
        run_floor(1, url, samples[:WARM_UP_SAMPLES], 0.5)
        ready.put(("bare", True))
        told = True
        if not go.wait(READY_S):
            raise RuntimeError("no start signal came")
        began = time.time()
        figures = run_floor(n, url, samples, run_s)
        out.put(("bare", {**figures, "began_at": round(began, 3), "ended_at": round(time.time(), 3)}))
    except BaseException:
        report_failure("bare", ready, told, out)


def _peer_side(python: Path, n: int, url: str, recording: Path, run_s: float, ready: multiprocessing.Queue[Any],
               go: Event, out: multiprocessing.Queue[Any]) -> None:
    signal.signal(signal.SIGTERM, _exit_on_terminate)  # a pair stopped early stops the peer's own process too
    told = False

    def say_ready() -> None:
        nonlocal told
        ready.put(("peer", True))
        told = True

    def start() -> None:
        if not go.wait(READY_S):
            raise RuntimeError("no start signal came")

    try:
        out.put(("peer", run_peer_on_signal(python, n, url, recording, run_s, say_ready, start)))
    except BaseException:
        report_failure("peer", ready, told, out)


class _PairFailed(RuntimeError):
    """A side of the pair failed: what it said, and where."""

    def __init__(self, name: str, error: str) -> None:
        super().__init__(f"the pair run at once failed: {name}: {error}")


def _exit_on_terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _take(box: multiprocessing.Queue[Any], sides: Sequence[BaseProcess], timeout_s: float,
          reported: set[str]) -> tuple[str, Any]:
    """The next message on ``box``, a side's ``(name, what)``. A report with an ``error`` raises at once; so does a
    side that ended without its message (``reported``: the names that sent theirs), with its exit code; and so does
    the timeout, naming the sides still silent."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            name, what = box.get(timeout=_POLL_S)
        except queue.Empty:
            gone = [side for side in sides if side.exitcode is not None and side.name not in reported]
            if gone:  # what it sent just before it ended may still be on its way
                try:
                    name, what = box.get(timeout=2 * _POLL_S)
                except queue.Empty:
                    raise RuntimeError(f"the {gone[0].name} side ended (exit {gone[0].exitcode}) without a word"
                                       ) from None
            elif time.monotonic() > deadline:
                silent = ", ".join(sorted(str(side.name) for side in sides if side.name not in reported))
                raise RuntimeError(f"the pair run at once waited {timeout_s:.0f} s for the {silent} side") from None
            else:
                continue
        reported.add(name)
        if isinstance(what, dict) and "error" in what:
            raise _PairFailed(name, what["error"])
        return name, what


def at_once(targets: dict[str, tuple[Callable[..., None], tuple[Any, ...]]], run_s: float,
            on_go: Callable[[], None] | None = None, ready_s: float = READY_S) -> tuple[dict[str, dict[str, Any]], float]:
    """Run each target (by the name it reports under) in a ``spawn`` process, with ``(ready, go, out)`` after its
    arguments; give the start signal once every side is ready (``on_go`` just before). Each side's report by its
    name, and the wall time from the signal. The first side that fails, before or after the start, stops the pair
    (the others are terminated) and is named in the error with what it said."""
    spawn = multiprocessing.get_context("spawn")
    ready: multiprocessing.Queue[Any] = spawn.Queue()
    out: multiprocessing.Queue[Any] = spawn.Queue()
    go = spawn.Event()
    sides = [spawn.Process(target=target, args=(*args, ready, go, out), name=name, daemon=True)
             for name, (target, args) in targets.items()]
    started: list[BaseProcess] = []
    try:
        for side in sides:
            side.start()
            started.append(side)
        said_ready: set[str] = set()
        for _ in sides:
            name, ok = _take(ready, sides, ready_s, said_ready)
            if not ok:  # it failed before the start: its report says why (and raises)
                _take(out, [side for side in sides if side.name == name], 10.0, set())
                raise RuntimeError(f"the {name} side failed before the start")
        if on_go is not None:
            on_go()
        go.set()
        wall0 = time.perf_counter()
        reports: dict[str, dict[str, Any]] = {}
        done: set[str] = set()
        while len(reports) < len(sides):
            name, what = _take(out, sides, run_s + _MARGIN_S, done)
            reports[name] = what
        wall = time.perf_counter() - wall0
    finally:
        for stopping in started:  # a side's own clean-up runs on a terminate (a peer stops its subprocess)
            if stopping.is_alive():
                stopping.terminate()
        for stopping in started:
            stopping.join(timeout=10.0)
            if stopping.is_alive():
                stopping.kill()
                stopping.join()
    return reports, wall


def run_side_by_side(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, *, wav: bool = True,
                     levers_off: Sequence[str] = (), on_go: Callable[[], None] | None = None) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` bare receivers against ``url`` at once, each client in its own process;
    each side's figures (``voxline``, ``bare``) and voxline's CPU per session as a ratio to the bare receivers'.

    Raises ``RuntimeError`` naming the side when one fails, or does not get ready or report in time.
    """
    run_s = run_seconds(samples, tail_s)  # a bare receiver runs as long as a session lasts
    with tempfile.TemporaryDirectory(prefix="voxline-at-once-") as tmp:
        reports, wall = at_once({
            "voxline": (_voxline_side, ("voxline", url, n, samples, tail_s, tmp if wav else None, tuple(levers_off))),
            "bare": (_bare_side, (url, n, samples, run_s)),
        }, run_s, on_go)
    mine, bare = reports["voxline"], reports["bare"]
    return {"sessions": n, "wall_s": round(wall, 2), "voxline": mine, "bare": bare,
            "voxline_ratio": ratio(mine["client_cpu_per_session_s"], bare["client_cpu_per_session_s"])}


def run_peer_at_once(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, python: Path, recording: Path,
                     *, wav: bool = True, levers_off: Sequence[str] = ()) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` openai-agents sessions (:mod:`benchmarks.concurrent_peer`, in the
    interpreter ``python``, streaming ``recording``, whose samples ``samples`` are) at once against ``url``; each
    side's figures and voxline's CPU per session as a ratio to openai-agents'."""
    run_s = run_seconds(samples, tail_s)
    with tempfile.TemporaryDirectory(prefix="voxline-at-once-") as tmp:
        reports, wall = at_once({
            "voxline": (_voxline_side, ("voxline", url, n, samples, tail_s, tmp if wav else None, tuple(levers_off))),
            "peer": (_peer_side, (python, n, url, recording, run_s)),
        }, run_s)
    mine, theirs = reports["voxline"], reports["peer"]
    return {"sessions": n, "wall_s": round(wall, 2), "voxline": mine, "peer": theirs,
            "voxline_ratio": ratio(mine["client_cpu_per_session_s"], theirs["client_cpu_per_session_s"])}


def run_levers_at_once(url: str, n: int, samples: npt.NDArray[np.int16], tail_s: float, levers_off: Sequence[str],
                       *, wav: bool = True) -> dict[str, Any]:
    """``n`` voxline sessions with the levers in ``levers_off`` undone (the former path) and ``n`` as they are (the
    new), at once, each side in its own process against ``url``; the new side's CPU per session over the former's."""
    with tempfile.TemporaryDirectory(prefix="voxline-at-once-") as tmp:
        (Path(tmp) / "former").mkdir()
        (Path(tmp) / "new").mkdir()
        reports, wall = at_once({
            "former": (_voxline_side, ("former", url, n, samples, tail_s, f"{tmp}/former" if wav else None,
                                       tuple(levers_off))),
            "new": (_voxline_side, ("new", url, n, samples, tail_s, f"{tmp}/new" if wav else None, ())),
        }, run_seconds(samples, tail_s))
    former, new = reports["former"], reports["new"]
    return {"sessions": n, "levers_off": list(levers_off), "wall_s": round(wall, 2), "former": former, "new": new,
            "new_over_former": ratio(new["client_cpu_per_session_s"], former["client_cpu_per_session_s"], 3)}


def main(argv: list[str] | None = None) -> int:
    """``python3 -m benchmarks.concurrent_at_once --levers-off idle_sleep``: pairs of runs, the former path and the new
    at once; each pair's ratio and their median."""
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
    if not 1 <= args.sessions <= 2000:
        parser.error(f"--sessions takes 1..2000, not {args.sessions}")
    if args.repeat < 1:
        parser.error(f"--repeat takes a count of at least 1, not {args.repeat}")
    workload = Workload().resolved()
    samples, _rate = read_wav(RECORDING)
    print(f"{args.sessions} sessions on each side, at once against one server; former: {', '.join(off)} undone; "
          f"new: as it is", flush=True)
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
