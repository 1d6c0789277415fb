"""N real-time voice sessions in one process against ``voxline serve`` in another.

The workload is the hard case: each session is a :class:`~voxline.session.VoiceSession`
replaying ``examples/audio/barge_in.wav`` (a question, then "stop, wait a second" spoken over the
reply) in real time (:class:`~voxline.base.clock.RealClock`, a
:class:`~voxline.audio.clocked_output.ClockedOutput` writing the session's heard WAV), against the
``long`` scenario (replies of many seconds, streamed at 4x real time as the service does) in the
espeak voice where espeak-ng is installed (else the tone voice), all started at once on one event
loop. The server is ``voxline serve --port 0`` started as a separate process for each N (its URL
read from its first line of output) and stopped after. ``--scenario default --voice tone
--no-wav`` is the light case (short replies, nothing written).

Figures for each N:

* **event-loop lag** p50/p99/max: a probe task sleeps 10 ms over and over and records how
  much later than asked it woke up;
* **barge-in lateness** p50/p99/max: the real-time ``BargeIn.at`` (listener time) minus the
  ``at`` of the same barge-in in the lockstep run of the same recording
  (:func:`~voxline.session.replay.replay_fast`, the exact cut instant);
* **underruns**: sessions whose playout ran dry while a reply was still coming, and how often;
* **cuts checked** against each session's heard WAV (:mod:`benchmarks.heard_check`): the audio
  heard up to each cut is the reply's, in order, gaps aside, and ends where the barge-in says the
  listener was (the worst error in samples; 0 is exact);
* **failed** sessions: an exception out of the session or a fatal ``SessionError``;
  sessions whose barge-ins differ in number from the lockstep run are counted apart, and
  every ``SessionError`` (fatal or not: reconnects, a server gone silent) by its code;
* **client CPU per session-second**: ``time.process_time`` of this process over the sum of
  the sessions' durations (0.01 = 1% of one core per real-time session);
* **server CPU per session-second**: the server process's user + system time from
  ``/proc/<pid>/stat`` over the same sum;
* **RSS per session**: the highest resident set size of the process sampled during the
  run minus the one before it, over N; each N runs in a fresh process (``spawn``), so
  memory an earlier run freed does not hide the sessions' own, after one half-second
  session that takes what a process does once (imports, the first connection) out of both
  the CPU and the RSS figures.

* **floor**: at the N of ``--floor`` (50 by default), N bare receivers (:mod:`benchmarks.concurrent_floor`:
  ``websockets`` + ``json`` + ``pybase64``, no playout) against a fresh server of the same kind,
  just before and just after voxline's sessions at that N, each as long as a session's recording
  and tail; voxline's client CPU per session is reported as a ratio to the mean of the two, so that
  a host whose speed drifts during a round moves both sides of the ratio alike;
* **lean floor**: at the same N, the same bare work on a leaner client (one ``asyncio.Protocol``
  per session driving websockets' sans-I/O protocol, each frame decoded in the read callback):
  what a Python asyncio client spends here beyond nothing but the wire, as a ratio to the floor;
* **peer**: at the same N, the nearest peer: N openai-agents realtime sessions (no playout), in
  that client's own environment (:mod:`benchmarks.concurrent_peer`), against a fresh server of
  the same kind, as a ratio to the floor and voxline's as a ratio to theirs (left out, saying
  how to build it, when ``.ci/install-clients openai_agents`` has not run);
* **side by side**: at the same N, voxline's sessions and the bare receivers at the same time, each
  client in its own process against one fresh server (:mod:`benchmarks.concurrent_at_once`): the
  host's speed moves within minutes, and only runs that share the same seconds see the same host;
  but at once the two clients also share the cores and caches, which weighs on one more than the
  other, so this ratio and the bracketed one are both kept; openai-agents' sessions run at once
  beside voxline's the same way, for the peer's ratio;
* **goal** of each N: loop lag p99 <= 20 ms, lateness spread (p99 - p50) <= 40 ms, no underrun,
  no failure, no cut off what was heard, client plus server below 60% of the machine's cores;
  the **knee** is the largest N whose every run meets it, and the first N that does not says
  where degradation begins and why.

The machine (cores, platform, Python, load average before and after each N) goes in the
JSON beside them: on a shared machine the load decides much of the lag. Run:
``python3 -m benchmarks.bench_concurrent`` (N = 50, 100, 150, 200, 250, 300, three runs each;
``--short``: 10 on the first 7 s of the recording; ``--sessions 10,50 --repeat 1``).
"""

from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.wavio import read_wav
from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.replay import replay_fast
from voxline.session.replay.result import ReplayResult

from .common import environment, format_table, ratio
from .concurrent_at_once import run_peer_at_once, run_side_by_side
from .concurrent_floor import run_floor
from .concurrent_peer import peer_python, run_peer
from .concurrent_sessions import (
    PROBE_S,
    RATE,
    RECORDING,
    SCENARIO,
    TAIL_S,
    VOICE,
    WARM_UP_SAMPLES,
    Server,
    Workload,
    event_loop,
    failure,
    load_average,
    rss_bytes,
    run_on_command_loop,
    run_seconds,
    settings_for,
    voxline_sessions,
)
from .heard_check import check_cut
from .record import add_output_arguments, finish, run_section

__all__ = ["FULL", "GOAL", "SHORT", "SHORT_SECONDS", "SHORT_TAIL_S", "Server", "Workload", "bracketed", "knee",
           "lockstep_reference", "machine", "main", "meets_goal", "peer_at_once", "percentiles", "run", "run_sessions",
           "section", "side_by_side", "table"]

FULL = (50, 100, 150, 200, 250, 300)
REPEAT = 3  # runs of each N: a knee holds only if every run meets the goal
FLOOR_AT = (50,)
SHORT = (10,)
SHORT_SECONDS = 7.0  # --short keeps the question and the barge-in of the recording
SHORT_TAIL_S = 0.5
GOAL = {"lag_p99_ms": 20.0, "spread_ms": 40.0, "cores_share": 0.60}


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of ``values`` in ms (NaN when there are none), rounded to 0.01 ms."""
    if not values:
        return {"p50_ms": math.nan, "p99_ms": math.nan, "max_ms": math.nan}
    ms = np.asarray(values, dtype=float) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
    }


def machine() -> dict[str, Any]:
    """What ran the figures: cores, platform, Python, the package versions that matter."""
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        **{f"version_{k}": v for k, v in environment().items() if k != "python"},
    }


def lockstep_reference(samples: npt.NDArray[np.int16], tail_s: float = TAIL_S,
                       liveness_timeout_s: float | None = None, workload: Workload = Workload()) -> list[float]:
    """The listener times of the barge-ins in the lockstep run of the recording."""
    result = replay_fast(samples, scenario=load_scenario(workload.scenario),
                         settings=settings_for("ws://local", liveness_timeout_s), voice=workload.voice, tail_s=tail_s)
    ats = [b.at for b in result.barge_ins]
    if not ats:
        raise RuntimeError(f"the lockstep run of {RECORDING.name} has no barge-in: nothing to compare against")
    return ats


def _check_cuts(results: Sequence[ReplayResult | BaseException], wav_dir: Path | None,
                reply: npt.NDArray[np.int16] | None) -> dict[str, Any]:
    """Every cut against its session's heard WAV (see :mod:`benchmarks.heard_check`)."""
    if wav_dir is None or reply is None:
        return {"checked": 0, "not_heard_audio": 0, "max_error_samples": 0}
    checked = wrong = 0
    worst = 0
    for k, result in enumerate(results):
        if isinstance(result, BaseException) or not result.barge_ins:
            continue
        heard, _rate = read_wav(wav_dir / f"heard-{k:04d}.wav")
        barge = result.barge_ins[0]  # the first cuts the first reply; later ones cut replies the WAV interleaves
        if barge.item_id is None:
            continue
        check = check_cut(heard, reply, barge)
        checked += 1
        wrong += not check.same_audio
        worst = max(worst, check.error_samples)
    return {"checked": checked, "not_heard_audio": wrong, "max_error_samples": worst}


def run_sessions(n: int, samples: npt.NDArray[np.int16], reference: Sequence[float], *,
                 tail_s: float = TAIL_S, liveness_timeout_s: float | None = None,
                 workload: Workload = Workload()) -> dict[str, Any]:
    """``n`` sessions at once against a fresh ``voxline serve``; the figures of that run."""
    load_before = load_average()
    reply = workload.first_reply() if workload.wav else None
    with tempfile.TemporaryDirectory(prefix="voxline-concurrent-") as tmp, Server(workload=workload) as server:
        wav_dir = Path(tmp) if workload.wav else None
        # one short session first: what a process does once (lazy imports, first connection)
        # is not a cost of the N sessions measured next
        run_on_command_loop(voxline_sessions(1, server.url, samples[:WARM_UP_SAMPLES], 0.0, liveness_timeout_s,
                                             None, workload.levers_off))
        rss0 = rss_bytes()
        cpu0, server0, wall0 = time.process_time(), server.cpu_s(), time.perf_counter()
        results, probe = run_on_command_loop(voxline_sessions(n, server.url, samples, tail_s, liveness_timeout_s,
                                                              wav_dir, workload.levers_off))
        cpu1, server1, wall1 = time.process_time(), server.cpu_s(), time.perf_counter()
        server_alive = server.process.poll() is None
        cuts = _check_cuts(results, wav_dir, reply)
    failed: list[str] = []
    mismatched = 0
    lateness: list[float] = []
    session_s = 0.0
    underran = underruns = 0
    errors: Counter[str] = Counter()
    for result in results:
        why = failure(result)
        if isinstance(result, BaseException):
            failed.append(str(why))
            continue
        session_s += result.duration_s
        underran += result.underrun_events > 0
        underruns += result.underrun_events
        errors.update(e.code or "unnamed" for e in result.events if isinstance(e, SessionError))
        if why is not None:
            failed.append(why)
            continue
        ats = [b.at for b in result.barge_ins]
        if len(ats) != len(reference):
            mismatched += 1
        lateness.extend(at - ref for at, ref in zip(ats, reference, strict=False))
    # no barge-in to compare (every session missed it): no lateness figures rather than null ones
    late = percentiles(lateness) if lateness else {}
    spread = {"lateness_spread_ms": round(late["p99_ms"] - late["p50_ms"], 2)} if lateness else {}
    wall = wall1 - wall0
    return {
        "sessions": n,
        "failed": len(failed),
        "failures": sorted(set(failed))[:5],
        "barge_in_count_mismatch": mismatched,
        "session_errors": dict(sorted(errors.items())),
        "loop_lag": percentiles(probe.lags),
        "probe_wakeups": len(probe.lags),
        "barge_in_lateness": late,
        **spread,
        "barge_ins_compared": len(lateness),
        "sessions_underran": underran,
        "underruns": underruns,
        "cuts": cuts,
        "session_seconds": round(session_s, 2),
        "wall_s": round(wall, 2),
        "client_cpu_s": round(cpu1 - cpu0, 3),
        "server_cpu_s": round(server1 - server0, 3),
        "client_cpu_per_session_s": ratio(cpu1 - cpu0, session_s, 5),
        "server_cpu_per_session_s": ratio(server1 - server0, session_s, 5),
        "cores_share": round((cpu1 - cpu0 + server1 - server0) / wall / (os.cpu_count() or 1), 3) if wall > 0 else math.nan,
        "rss_per_session_mib": round((probe.peak_rss - rss0) / n / 2**20, 3),
        "server_survived": server_alive,
        "load_before": load_before,
        "load_after": load_average(),
    }


def peer_sessions(python: Path, n: int, recording: Path, run_s: float, workload: Workload = Workload()) -> dict[str, Any]:
    """``n`` openai-agents sessions against a fresh ``voxline serve`` (:mod:`benchmarks.concurrent_peer`)."""
    load_before = load_average()
    with Server(workload=workload) as server:
        server0 = server.cpu_s()
        figures = run_peer(python, n, server.url, recording, run_s)
        server1 = server.cpu_s()
    figures["server_cpu_per_session_s"] = ratio(server1 - server0, figures["session_seconds"], 5)
    return {**figures, "load_before": load_before, "load_after": load_average()}


def floor_sessions(n: int, samples: npt.NDArray[np.int16], run_s: float, workload: Workload = Workload(),
                   lean: bool = False) -> dict[str, Any]:
    """``n`` bare receivers (lean ones with ``lean``) against a fresh ``voxline serve`` (:mod:`benchmarks.concurrent_floor`)."""
    load_before = load_average()
    with Server(workload=workload) as server:
        server0 = server.cpu_s()
        figures = run_floor(n, server.url, samples, run_s, lean=lean)
        server1 = server.cpu_s()
    figures["server_cpu_per_session_s"] = ratio(server1 - server0, figures["session_seconds"], 5)
    return {**figures, "load_before": load_before, "load_after": load_average()}


def side_by_side(n: int, samples: npt.NDArray[np.int16], tail_s: float, workload: Workload = Workload()
                 ) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` bare receivers at once against one fresh ``voxline serve``
    (:mod:`benchmarks.concurrent_at_once`); the server's CPU, from the start signal on, is per session of
    either kind."""
    load_before = load_average()
    started: list[float] = []
    with Server(workload=workload) as server:
        figures = run_side_by_side(server.url, n, samples, tail_s, wav=workload.wav, levers_off=workload.levers_off,
                                   on_go=lambda: started.append(server.cpu_s()))
        server1 = server.cpu_s()
    session_s = figures["voxline"]["session_seconds"] + figures["bare"]["session_seconds"]
    figures["server_cpu_per_session_s"] = ratio(server1 - started[0], session_s, 5)
    return {**figures, "load_before": load_before, "load_after": load_average()}


def peer_at_once(n: int, samples: npt.NDArray[np.int16], tail_s: float, python: Path, recording: Path,
                 workload: Workload = Workload()) -> dict[str, Any]:
    """``n`` voxline sessions and ``n`` openai-agents sessions at once against one fresh ``voxline serve``
    (:mod:`benchmarks.concurrent_at_once`)."""
    load_before = load_average()
    with Server(workload=workload) as server:
        figures = run_peer_at_once(server.url, n, samples, tail_s, python, recording, wav=workload.wav,
                                   levers_off=workload.levers_off)
    return {**figures, "load_before": load_before, "load_after": load_average()}


def bracketed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """One floor from the runs just before and just after voxline's: the later run's figures (``failed``, the
    CPU seconds, the frames), with the mean CPU per session of the two (and each, as ``before_…`` and
    ``after_…``) and the earlier run's failures as ``failed_before``."""
    mean = (before["client_cpu_per_session_s"] + after["client_cpu_per_session_s"]) / 2
    return {**after, "failed_before": before["failed"],
            "failures": sorted(set(before["failures"]) | set(after["failures"]))[:3],
            "client_cpu_per_session_s": round(mean, 5),
            "before_cpu_per_session_s": before["client_cpu_per_session_s"],
            "after_cpu_per_session_s": after["client_cpu_per_session_s"]}


def meets_goal(r: dict[str, Any]) -> list[str]:
    """What keeps run ``r`` from the goal (empty when it meets it)."""
    misses = []
    if r["failed"] or r["barge_in_count_mismatch"] or not r["server_survived"]:
        misses.append("failures")
    if not (r["loop_lag"]["p99_ms"] or math.nan) <= GOAL["lag_p99_ms"]:
        misses.append(f"lag p99 {r['loop_lag']['p99_ms']} ms")
    if "lateness_spread_ms" not in r:
        misses.append("no barge-in")
    elif not r["lateness_spread_ms"] <= GOAL["spread_ms"]:
        misses.append(f"spread {r['lateness_spread_ms']} ms")
    if r["sessions_underran"]:
        misses.append(f"{r['sessions_underran']} session{'' if r['sessions_underran'] == 1 else 's'} underran")
    if r["cuts"]["not_heard_audio"] or r["cuts"]["max_error_samples"] > 1:
        misses.append("a cut off what was heard")
    if not (r["cores_share"] or math.nan) <= GOAL["cores_share"]:
        misses.append(f"{100 * r['cores_share']:.0f}% of the cores")
    return misses


def knee(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The largest N all of whose runs (and those of every smaller N) meet the goal (0: none does), and
    the first N where one does not, with why, run by run (``degrades_at`` and ``why`` only when there is one)."""
    by_n: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        by_n.setdefault(r["sessions"], []).append(r)
    holds = 0
    for n in sorted(by_n):
        misses = [f"run {k}: {', '.join(m)}" for k, r in enumerate(by_n[n], 1) if (m := meets_goal(r))]
        if misses:
            return {"largest_n_meeting_goal": holds, "degrades_at": n, "why": misses}
        holds = n
    return {"largest_n_meeting_goal": holds}


def run(sessions: Sequence[int] = FULL, *, recording: Path = RECORDING, seconds: float | None = None,
        tail_s: float = TAIL_S, liveness_timeout_s: float | None = None, workload: Workload = Workload(),
        repeat: int = 1, floor_at: Sequence[int] = ()) -> dict[str, Any]:
    """Every N of ``sessions`` in turn (``repeat`` rounds), each against its own server; the whole result.

    ``seconds`` keeps only the start of the recording (the lockstep reference is taken from
    the same samples), ``tail_s`` bounds how long a session runs after its input ended;
    ``liveness_timeout_s`` replaces the sessions' setting of that name (0: no watchdog).
    ``floor_at``: the N at which bare receivers are measured too, and openai-agents' sessions
    when its environment was built and the whole recording is played.
    """
    workload = workload.resolved()
    samples, rate = read_wav(recording)
    if rate != RATE:
        raise RuntimeError(f"{recording} is at {rate} Hz; the sessions take 24 kHz")
    if seconds is not None:
        samples = samples[: int(seconds * rate)]
    reference = lockstep_reference(samples, tail_s, liveness_timeout_s, workload)
    floor_s = run_seconds(samples, tail_s)  # how long each floor, lean floor and peer session runs
    runs: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    lean_floors: list[dict[str, Any]] = []
    peers: list[dict[str, Any]] = []
    besides: list[dict[str, Any]] = []
    peers_at_once: list[dict[str, Any]] = []
    peer = peer_python() if floor_at and seconds is None else None
    spawn = multiprocessing.get_context("spawn")
    for round_ in range(repeat):
        for n in sessions:
            # each N in a fresh process: its RSS growth and loop are the sessions' own, not what an
            # earlier N (or another benchmark) left allocated
            if n in floor_at:
                with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                    floor_before = pool.submit(floor_sessions, n, samples, floor_s, workload).result()
            with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                runs.append(pool.submit(run_sessions, n, samples, reference, tail_s=tail_s,
                                        liveness_timeout_s=liveness_timeout_s, workload=workload).result())
            r = runs[-1]
            print(f"  N = {n} (run {round_ + 1}): {r['wall_s']} s, {r['failed']} failed, lag p99 "
                  f"{r['loop_lag']['p99_ms']} ms, client {100 * r['client_cpu_per_session_s']:.2f}%", file=sys.stderr,
                  flush=True)
            if n in floor_at:
                with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                    floor = bracketed(floor_before, pool.submit(floor_sessions, n, samples, floor_s, workload).result())
                floor["voxline_ratio"] = ratio(r["client_cpu_per_session_s"], floor["client_cpu_per_session_s"])
                floors.append(floor)
                print(f"  floor N = {n}: client {100 * floor['before_cpu_per_session_s']:.2f}% before, "
                      f"{100 * floor['after_cpu_per_session_s']:.2f}% after, voxline {floor['voxline_ratio']}x their mean",
                      file=sys.stderr, flush=True)
                with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                    lean = pool.submit(floor_sessions, n, samples, floor_s, workload, True).result()
                lean["voxline_ratio"] = ratio(r["client_cpu_per_session_s"], lean["client_cpu_per_session_s"])
                # the lean floor and the peer run after the floor's second run: their own ratio to the floor is to
                # that run, the one beside them (the mean is centred on voxline's sessions, not on theirs)
                lean["floor_ratio"] = ratio(lean["client_cpu_per_session_s"], floor["after_cpu_per_session_s"])
                lean_floors.append(lean)
                print(f"  lean floor N = {n}: client {100 * lean['client_cpu_per_session_s']:.2f}%, voxline "
                      f"{lean['voxline_ratio']}x", file=sys.stderr, flush=True)
                if peer is not None:
                    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
                        theirs = pool.submit(peer_sessions, peer, n, recording, floor_s, workload).result()
                    theirs["voxline_ratio"] = ratio(r["client_cpu_per_session_s"], theirs["client_cpu_per_session_s"])
                    theirs["floor_ratio"] = ratio(theirs["client_cpu_per_session_s"], floor["after_cpu_per_session_s"])
                    peers.append(theirs)
                    print(f"  openai-agents N = {n}: client {100 * theirs['client_cpu_per_session_s']:.2f}%, voxline "
                          f"{theirs['voxline_ratio']}x that", file=sys.stderr, flush=True)
                    with_peer = peer_at_once(n, samples, tail_s, peer, recording, workload)
                    peers_at_once.append(with_peer)
                    print(f"  voxline and openai-agents at once, N = {n}: "
                          f"{100 * with_peer['voxline']['client_cpu_per_session_s']:.2f}% and "
                          f"{100 * with_peer['peer']['client_cpu_per_session_s']:.2f}%, voxline {with_peer['voxline_ratio']}x",
                          file=sys.stderr, flush=True)
                both = side_by_side(n, samples, tail_s, workload)
                besides.append(both)
                print(f"  side by side N = {n}: voxline {100 * both['voxline']['client_cpu_per_session_s']:.2f}%, bare "
                      f"receivers {100 * both['bare']['client_cpu_per_session_s']:.2f}%, voxline {both['voxline_ratio']}x",
                      file=sys.stderr, flush=True)
    return {
        "benchmark": "concurrent",
        "machine": machine(),
        "parameters": {
            "recording": recording.name,
            "recording_s": round(len(samples) / rate, 3),
            "scenario": workload.scenario,
            "server_voice": workload.voice,
            "heard_wavs": workload.wav,
            "levers_off": list(workload.levers_off),
            # voxline's sessions' and the floor's, from VOXLINE_EVENT_LOOP; the server's too, unless --server-python
            # runs a checkout that does not read it
            "event_loop": event_loop(),
            "server_python": workload.server_python or "",
            "probe_sleep_ms": PROBE_S * 1000,
            "tail_s": tail_s,
            "repeat": repeat,
            "goal": GOAL,
            "liveness_timeout_s": settings_for("ws://local", liveness_timeout_s).liveness_timeout_s,
            "lockstep_barge_in_at_s": [round(t, 4) for t in reference],
        },
        "runs": runs,
        "floor": floors,
        "lean_floor": lean_floors,
        "peers": peers,
        "side_by_side": besides,
        "peers_at_once": peers_at_once,
        "peer_missing": "" if peer is not None or not floor_at or seconds is not None else
        "openai-agents not measured: build its environment with .ci/install-clients openai_agents",
        "knee": knee(runs),
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``concurrent`` figures; ``short``: N = 10 on the first 7 s of the recording, 0.5 s tail."""
    if short:
        return run(SHORT, seconds=SHORT_SECONDS, tail_s=SHORT_TAIL_S)
    return run(FULL, repeat=REPEAT, floor_at=FLOOR_AT)


def _row(r: dict[str, Any]) -> list[str]:
    def pct(x: float | None) -> str:
        return "—" if x is None or x != x else f"{100 * x:.2f}%"

    def ms(x: float | None) -> str:
        return "—" if x is None or x != x else f"{x:.1f}"

    lag, late = r["loop_lag"], r["barge_in_lateness"]
    return [str(r["sessions"]), str(r["failed"]), ms(lag["p50_ms"]), ms(lag["p99_ms"]), ms(late.get("p50_ms")),
            ms(late.get("p99_ms")), ms(r.get("lateness_spread_ms")), f"{r['sessions_underran']}",
            pct(r["client_cpu_per_session_s"]), pct(r["server_cpu_per_session_s"]), pct(r["cores_share"]),
            f"{r['rss_per_session_mib']:.2f}", f"{r['load_before'][0]:.2f} → {r['load_after'][0]:.2f}",
            "yes" if not meets_goal(r) else "no"]


def table(result: dict[str, Any]) -> str:
    head = ["N", "failed", "lag p50 ms", "lag p99 ms", "late p50 ms", "late p99 ms", "spread ms", "underran",
            "client CPU/s", "server CPU/s", "cores", "RSS MiB/sess", "load 1 min", "goal"]
    lines = [format_table(head, [_row(r) for r in result["runs"]])]
    for f in result.get("floor", []):
        around = (f" (just before and after voxline's: {100 * f['before_cpu_per_session_s']:.2f}%, "
                  f"{100 * f['after_cpu_per_session_s']:.2f}%)" if "before_cpu_per_session_s" in f else "")
        lines.append(f"bare receivers at N = {f['sessions']}: client {100 * f['client_cpu_per_session_s']:.2f}% per "
                     f"session{around}; voxline {f['voxline_ratio']}x that")
    for f in result.get("lean_floor", []):
        lines.append(f"lean bare receivers at N = {f['sessions']}: client {100 * f['client_cpu_per_session_s']:.2f}% per "
                     f"session ({f['floor_ratio']}x the bare receivers); voxline {f['voxline_ratio']}x that")
    for p in result.get("peers", []):
        lines.append(f"openai-agents at N = {p['sessions']} (no playout, {p['failed']} failed): client "
                     f"{100 * p['client_cpu_per_session_s']:.2f}% per session ({p['floor_ratio']}x the bare receivers); "
                     f"voxline {p['voxline_ratio']}x that")
    for b in result.get("peers_at_once", []):
        lines.append(f"openai-agents at once at N = {b['sessions']}: voxline {100 * b['voxline']['client_cpu_per_session_s']:.2f}%, "
                     f"openai-agents {100 * b['peer']['client_cpu_per_session_s']:.2f}% per session; voxline "
                     f"{b['voxline_ratio']}x that")
    for b in result.get("side_by_side", []):
        lines.append(f"side by side at N = {b['sessions']} (at once, each in its own process): voxline "
                     f"{100 * b['voxline']['client_cpu_per_session_s']:.2f}%, bare receivers "
                     f"{100 * b['bare']['client_cpu_per_session_s']:.2f}% per session; voxline {b['voxline_ratio']}x that")
    if result.get("peer_missing"):
        lines.append(result["peer_missing"])
    k = result.get("knee")
    if k is not None:
        where = f"; degrades at N = {k['degrades_at']} ({'; '.join(k['why'])})" if "degrades_at" in k else ""
        lines.append(f"knee: N = {k['largest_n_meeting_goal'] or 'none'}{where}")
    return "\n".join(lines)


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected session counts such as 10,50, not {text!r}") from None
    if not values or any(v < 1 or v > 2000 for v in values):
        raise argparse.ArgumentTypeError(f"session counts must be 1..2000, not {text!r}")
    return values


def _floor_counts(text: str) -> tuple[int, ...]:
    return () if text in ("", "none") else _counts(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, not {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--short", action="store_true",
                        help=f"N = {', '.join(map(str, SHORT))} on the first {SHORT_SECONDS:g} s of the recording (for CI)")
    parser.add_argument("--sessions", type=_counts, default=None, metavar="N,N,...",
                        help=f"session counts (default {','.join(map(str, FULL))})")
    parser.add_argument("--repeat", type=int, default=None, metavar="R",
                        help=f"runs of every N, in rounds (default {REPEAT}; 1 with --short)")
    parser.add_argument("--floor", type=_floor_counts, default=None, metavar="N,N,...|none",
                        help=f"the N at which bare receivers are measured too (default {','.join(map(str, FLOOR_AT))})")
    parser.add_argument("--scenario", default=SCENARIO, help=f"the server's scenario (default {SCENARIO})")
    parser.add_argument("--voice", default=VOICE, help="the server's voice: espeak, tone or auto (default: auto)")
    parser.add_argument("--no-wav", action="store_true", help="sessions write no heard WAV (and cuts go unchecked)")
    parser.add_argument("--levers-off", default="", metavar="NAME,...",
                        help="client levers to undo, to measure what each saves (tick_gate, try_recv, barge_peek, idle_sleep, clock_read)")
    parser.add_argument("--server-python", default=None, metavar="PATH",
                        help="run voxline serve with this interpreter (another checkout's, to measure its server)")
    parser.add_argument("--liveness-timeout", type=_seconds, default=None, metavar="S",
                        help="the sessions' liveness_timeout_s (default: the session's own; 0 turns the watchdog off)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.short and args.write_results:
        parser.error("--short figures are a check that the benchmark runs; they are not recorded in the tracked file")
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat takes a count of at least 1")
    logging.basicConfig(level=logging.ERROR)  # each session's warnings are counted in session_errors instead
    sessions = args.sessions or (SHORT if args.short else FULL)
    repeat = args.repeat or (1 if args.short else REPEAT)
    floor_at = args.floor if args.floor is not None else (() if args.short else FLOOR_AT)
    off = tuple(name for name in args.levers_off.split(",") if name)
    if off:
        from .concurrent_levers import LEVERS

        if set(off) - set(LEVERS):
            parser.error(f"--levers-off takes some of {', '.join(LEVERS)}, not {args.levers_off!r}")
    workload = Workload(args.scenario, args.voice, not args.no_wav, off, args.server_python)
    shape: dict[str, Any] = {"seconds": SHORT_SECONDS, "tail_s": SHORT_TAIL_S} if args.short else {}
    done = run_section(lambda: run(sessions, liveness_timeout_s=args.liveness_timeout, workload=workload,
                                   repeat=repeat, floor_at=floor_at, **shape), short=args.short)
    result = done["figures"]
    path = finish(args, "concurrent", done)
    m = result["machine"]
    print(f"{m['cpu_count']} cores, {m['platform']}, Python {m['python']}; "
          f"CPU per session-second as a share of one core")
    print(table(result))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
