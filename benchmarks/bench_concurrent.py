"""N real-time voice sessions in one process against ``voxline serve`` in another.

Each session is a :class:`~voxline.session.VoiceSession` replaying
``examples/audio/barge_in.wav`` (a question, then "stop, wait a second" spoken over the
reply) in real time (:class:`~voxline.base.clock.RealClock`, a
:class:`~voxline.audio.clocked_output.ClockedOutput` into a :class:`~voxline.audio.sinks.NullSink`),
all started at once on one event loop. The server is ``voxline serve --port 0`` started as a
separate process for each N (its URL read from its first line of output) and stopped after.

Figures for each N:

* **event-loop lag** p50/p99/max: a probe task sleeps 10 ms over and over and records how
  much later than asked it woke up;
* **barge-in lateness** p50/p99/max: the real-time ``BargeIn.at`` (listener time) minus the
  ``at`` of the same barge-in in the lockstep run of the same recording
  (:func:`~voxline.session.replay.replay_fast`, the exact cut instant);
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

The machine (cores, platform, Python, load average before and after each N) goes in the
JSON beside them: on a shared machine the load decides much of the lag. Run:
``python3 -m benchmarks.bench_concurrent`` (N = 10, 50, 100, 200; ``--short``: 10 on the first
7 s of the recording; ``--sessions 10,50``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import SecretStr

from voxline.audio.sinks import NullSink
from voxline.audio.wavio import read_wav
from voxline.base.clock import RealClock
from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.replay import replay_fast, run_replay
from voxline.session.replay.result import ReplayResult
from voxline.session.settings import SessionSettings

from .common import environment, format_table
from .record import add_output_arguments, finish, run_section

__all__ = ["FULL", "SHORT", "SHORT_SECONDS", "SHORT_TAIL_S", "Server", "lockstep_reference", "machine", "main",
           "percentiles", "run", "run_sessions", "section", "table"]

RECORDING = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"
FULL = (10, 50, 100, 200)
SHORT = (10,)
SHORT_SECONDS = 7.0  # --short keeps the question and the barge-in of the recording
SHORT_TAIL_S = 0.5
PROBE_S = 0.010
WARM_UP_SAMPLES = 12_000  # half a second of the recording
TAIL_S = 2.0  # as examples/interruption_test.py: the replay ends at most 2 s after the input
VOICE = "tone"  # the server's voice: no external program, same replies in lockstep and real time
SCENARIO = "default"  # what `voxline serve` answers with unless told otherwise
_URL = re.compile(r"at (ws://\S+?)/realtime\b")
_TICK = os.sysconf("SC_CLK_TCK")


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


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


def _settings(url: str, liveness_timeout_s: float | None = None) -> SessionSettings:
    extra = {} if liveness_timeout_s is None else {"liveness_timeout_s": liveness_timeout_s}
    return SessionSettings(url=url, api_key=SecretStr("local"), turn_detection="server_vad", transcribe=False, **extra)


def lockstep_reference(samples: npt.NDArray[np.int16], tail_s: float = TAIL_S,
                       liveness_timeout_s: float | None = None) -> list[float]:
    """The listener times of the barge-ins in the lockstep run of the recording."""
    result = replay_fast(samples, scenario=load_scenario(SCENARIO), settings=_settings("ws://local", liveness_timeout_s),
                         voice=VOICE, tail_s=tail_s)
    ats = [b.at for b in result.barge_ins]
    if not ats:
        raise RuntimeError(f"the lockstep run of {RECORDING.name} has no barge-in: nothing to compare against")
    return ats


class Server:
    """``voxline serve --port 0`` in a separate process; :attr:`url` once it listens."""

    def __init__(self, *, timeout_s: float = 30.0) -> None:
        command = [sys.executable, "-m", "voxline", "serve", "--port", "0", "--voice", VOICE, "--scenario", SCENARIO]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.url = self._read_url(timeout_s)
        self._drain = threading.Thread(target=self._discard, daemon=True)  # keep the pipe from filling
        self._drain.start()

    def _read_url(self, timeout_s: float) -> str:
        assert self.process.stdout is not None
        found: list[str] = []
        seen: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                seen.append(line.rstrip())
                if match := _URL.search(line):
                    found.append(match.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not found:
            self.stop()
            raise RuntimeError(f"voxline serve printed no URL within {timeout_s:.0f} s: {' | '.join(seen[-5:])}")
        return found[0]

    def _discard(self) -> None:
        assert self.process.stdout is not None
        for _line in self.process.stdout:
            pass

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_s(self) -> float:
        return _proc_cpu_s(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class _Probe:
    lags: list[float]
    peak_rss: int


async def _probe(stop: asyncio.Event, probe: _Probe) -> None:
    loop = asyncio.get_running_loop()
    k = 0
    while not stop.is_set():
        asked = loop.time() + PROBE_S
        await asyncio.sleep(PROBE_S)
        probe.lags.append(max(0.0, loop.time() - asked))
        k += 1
        if k % 50 == 0:
            probe.peak_rss = max(probe.peak_rss, _rss_bytes())


async def _sessions(n: int, url: str, samples: npt.NDArray[np.int16], tail_s: float,
                    liveness_timeout_s: float | None) -> tuple[list[ReplayResult | BaseException], _Probe]:
    clock = RealClock()
    stop = asyncio.Event()
    probe = _Probe([], _rss_bytes())
    prober = asyncio.create_task(_probe(stop, probe))
    runs = [run_replay(samples, connector=None, clock=clock, settings=_settings(url, liveness_timeout_s),
                       sink=NullSink(), tail_s=tail_s)
            for _ in range(n)]
    try:
        results = await asyncio.gather(*runs, return_exceptions=True)
    finally:
        stop.set()
        await prober
    probe.peak_rss = max(probe.peak_rss, _rss_bytes())
    return list(results), probe


def run_sessions(n: int, samples: npt.NDArray[np.int16], reference: Sequence[float], *,
                 tail_s: float = TAIL_S, liveness_timeout_s: float | None = None) -> dict[str, Any]:
    """``n`` sessions at once against a fresh ``voxline serve``; the figures of that run."""
    load_before = _load()
    with Server() as server:
        # one short session first: what a process does once (lazy imports, first connection)
        # is not a cost of the N sessions measured next
        asyncio.run(_sessions(1, server.url, samples[:WARM_UP_SAMPLES], 0.0, liveness_timeout_s))
        rss0 = _rss_bytes()
        cpu0, server0, wall0 = time.process_time(), server.cpu_s(), time.perf_counter()
        results, probe = asyncio.run(_sessions(n, server.url, samples, tail_s, liveness_timeout_s))
        cpu1, server1, wall1 = time.process_time(), server.cpu_s(), time.perf_counter()
        server_alive = server.process.poll() is None
    failed: list[str] = []
    mismatched = 0
    lateness: list[float] = []
    session_s = 0.0
    errors: Counter[str] = Counter()
    for result in results:
        if isinstance(result, BaseException):
            failed.append(f"{type(result).__name__}: {result}"[:200])
            continue
        session_s += result.duration_s
        errors.update(e.code or "unnamed" for e in result.events if isinstance(e, SessionError))
        fatal = [e for e in result.events if isinstance(e, SessionError) and e.fatal]
        if fatal:
            failed.append(f"SessionError: {fatal[0]}"[:200])
            continue
        ats = [b.at for b in result.barge_ins]
        if len(ats) != len(reference):
            mismatched += 1
        lateness.extend(at - ref for at, ref in zip(ats, reference, strict=False))
    return {
        "sessions": n,
        "failed": len(failed),
        "failures": sorted(set(failed))[:5],
        "barge_in_count_mismatch": mismatched,
        "session_errors": dict(sorted(errors.items())),
        "loop_lag": percentiles(probe.lags),
        "probe_wakeups": len(probe.lags),
        "barge_in_lateness": percentiles(lateness),
        "barge_ins_compared": len(lateness),
        "session_seconds": round(session_s, 2),
        "wall_s": round(wall1 - wall0, 2),
        "client_cpu_s": round(cpu1 - cpu0, 3),
        "server_cpu_s": round(server1 - server0, 3),
        "client_cpu_per_session_s": round((cpu1 - cpu0) / session_s, 5) if session_s > 0 else math.nan,
        "server_cpu_per_session_s": round((server1 - server0) / session_s, 5) if session_s > 0 else math.nan,
        "rss_per_session_mib": round((probe.peak_rss - rss0) / n / 2**20, 3),
        "server_survived": server_alive,
        "load_before": load_before,
        "load_after": _load(),
    }


def run(sessions: Sequence[int] = FULL, *, recording: Path = RECORDING, seconds: float | None = None,
        tail_s: float = TAIL_S, liveness_timeout_s: float | None = None) -> dict[str, Any]:
    """Every N of ``sessions`` in turn, each against its own server; the whole result.

    ``seconds`` keeps only the start of the recording (the lockstep reference is taken from
    the same samples), ``tail_s`` bounds how long a session runs after its input ended;
    ``liveness_timeout_s`` replaces the sessions' setting of that name (0: no watchdog).
    """
    samples, rate = read_wav(recording)
    if rate != 24_000:
        raise RuntimeError(f"{recording} is at {rate} Hz; the sessions take 24 kHz")
    if seconds is not None:
        samples = samples[: int(seconds * rate)]
    reference = lockstep_reference(samples, tail_s, liveness_timeout_s)
    runs = []
    spawn = multiprocessing.get_context("spawn")
    for n in sessions:
        # each N in a fresh process: its RSS growth and loop are the sessions' own, not what an
        # earlier N (or another benchmark) left allocated
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            runs.append(pool.submit(run_sessions, n, samples, reference, tail_s=tail_s,
                                    liveness_timeout_s=liveness_timeout_s).result())
        print(f"  N = {n}: {runs[-1]['wall_s']} s, {runs[-1]['failed']} failed", file=sys.stderr, flush=True)
    return {
        "benchmark": "concurrent",
        "machine": machine(),
        "parameters": {
            "recording": recording.name,
            "recording_s": round(len(samples) / rate, 3),
            "scenario": SCENARIO,
            "server_voice": VOICE,
            "probe_sleep_ms": PROBE_S * 1000,
            "tail_s": tail_s,
            "liveness_timeout_s": _settings("ws://local", liveness_timeout_s).liveness_timeout_s,
            "lockstep_barge_in_at_s": [round(t, 4) for t in reference],
        },
        "runs": runs,
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``concurrent`` figures; ``short``: N = 10 on the first 7 s of the recording, 0.5 s tail."""
    return run(SHORT, seconds=SHORT_SECONDS, tail_s=SHORT_TAIL_S) if short else run()


def _row(r: dict[str, Any]) -> list[str]:
    def pct(x: float) -> str:
        return f"{100 * x:.2f}%"

    return [str(r["sessions"]), str(r["failed"]), f"{r['loop_lag']['p50_ms']:.1f}", f"{r['loop_lag']['p99_ms']:.1f}",
            f"{r['barge_in_lateness']['p50_ms']:.1f}", f"{r['barge_in_lateness']['p99_ms']:.1f}",
            pct(r["client_cpu_per_session_s"]), pct(r["server_cpu_per_session_s"]), f"{r['rss_per_session_mib']:.2f}",
            f"{r['load_before'][0]:.2f} → {r['load_after'][0]:.2f}"]


def table(result: dict[str, Any]) -> str:
    head = ["N", "failed", "lag p50 ms", "lag p99 ms", "late p50 ms", "late p99 ms", "client CPU/s", "server CPU/s",
            "RSS MiB/sess", "load 1 min"]
    return format_table(head, [_row(r) for r in result["runs"]])


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected session counts such as 10,50, not {text!r}") from None
    if not values or any(v < 1 or v > 2000 for v in values):
        raise argparse.ArgumentTypeError(f"session counts must be 1..2000, not {text!r}")
    return values


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
    parser.add_argument("--liveness-timeout", type=_seconds, default=None, metavar="S",
                        help="the sessions' liveness_timeout_s (default: the session's own; 0 turns the watchdog off)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.short and args.write_results:
        parser.error("--short figures are a check that the benchmark runs; they are not recorded in the tracked file")
    logging.basicConfig(level=logging.ERROR)  # each session's warnings are counted in session_errors instead
    sessions = args.sessions or (SHORT if args.short else FULL)
    shape: dict[str, Any] = {"seconds": SHORT_SECONDS, "tail_s": SHORT_TAIL_S} if args.short else {}
    done = run_section(lambda: run(sessions, liveness_timeout_s=args.liveness_timeout, **shape), short=args.short)
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
