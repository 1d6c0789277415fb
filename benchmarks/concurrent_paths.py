"""Where a voxline client's CPU goes while N sessions run: the main paths' own time, per second of a session.

The concurrent benchmark gives one figure for the client; this splits it. Each path below is
wrapped, for this run only, to add the CPU time of the calling thread spent inside it
(``time.thread_time``) to its account; a path called from inside another (a tick from an output's
pass) counts in both. Figures are µs per session-second, calls per session-second and µs per call,
beside the whole process's CPU over the same sessions. Each wrapper adds a call and two clock reads
to every call of its path, which the figures include.

Run: ``python3 -m benchmarks.concurrent_paths`` (``--sessions N``, default 50).
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.connection import Connection

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.wavio import read_wav
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.transports.websocket import WebSocketTransport
from voxline.session.input_feed import InputFeed
from voxline.session.machine.machine import SessionMachine

from .concurrent_sessions import (RECORDING, TAIL_S, WARM_UP_SAMPLES, Server, Workload, run_on_command_loop,
                                  voxline_sessions)

__all__ = ["PATHS", "measured", "run_paths"]

PATHS: dict[str, tuple[type, str]] = {
    "output: a pass (its tick included)": (ClockedOutput, "_pass"),
    "machine: a server event": (SessionMachine, "receive"),
    "machine: a microphone block": (SessionMachine, "captured"),
    "machine: a tick": (SessionMachine, "tick"),
    "protocol: a frame parsed and checked": (RealtimeProtocol, "receive"),
    "microphone: appends written at once": (InputFeed, "_flush_now"),
    "websocket: a frame written": (WebSocketTransport, "try_send"),
    "websocket: bytes read parsed into frames": (Connection, "data_received"),
    "connection: a look for a barge-in read ahead": (RealtimeConnection, "queued"),
}


@contextmanager
def measured(paths: dict[str, tuple[type, str]] = PATHS) -> Iterator[tuple[dict[str, float], Counter[str]]]:
    """While inside: each path's CPU seconds and calls, by its name; the paths are put back on the way out."""
    spent: dict[str, float] = dict.fromkeys(paths, 0.0)
    calls: Counter[str] = Counter()
    saved = [(owner, attr, owner.__dict__[attr]) for owner, attr in paths.values()]

    def wrapped(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.thread_time

        @functools.wraps(function)
        def path(*args: Any, **kwargs: Any) -> Any:
            began = clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += clock() - began
                calls[name] += 1

        return path

    try:
        for name, (owner, attr) in paths.items():
            setattr(owner, attr, wrapped(name, owner.__dict__[attr]))
        yield spent, calls
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def run_paths(n: int, seconds: float | None = None, tail_s: float | None = None) -> dict[str, Any]:
    """``n`` sessions of the concurrent benchmark's workload against a fresh server; each path's share."""
    tail = TAIL_S if tail_s is None else tail_s
    workload = Workload().resolved()
    samples, rate = read_wav(RECORDING)
    if seconds is not None:
        samples = samples[: int(seconds * rate)]
    with tempfile.TemporaryDirectory(prefix="voxline-paths-") as tmp, Server(workload=workload) as server:
        # what a process does once
        run_on_command_loop(voxline_sessions(1, server.url, samples[:WARM_UP_SAMPLES], 0.0, None))
        with measured() as (spent, calls):
            cpu0 = time.process_time()
            results, _probe = run_on_command_loop(voxline_sessions(n, server.url, samples, tail, None, Path(tmp)))
            cpu = time.process_time() - cpu0
    session_s = sum(r.duration_s for r in results if not isinstance(r, BaseException))
    if session_s <= 0:
        raise RuntimeError("no session ran: nothing to share out")
    return {
        "sessions": n,
        "failed": sum(isinstance(r, BaseException) for r in results),
        "session_seconds": round(session_s, 2),
        "client_us_per_session_s": round(1e6 * cpu / session_s, 1),
        "paths": {name: {"us_per_session_s": round(1e6 * spent[name] / session_s, 1),
                         "calls_per_session_s": round(calls[name] / session_s, 2),
                         "us_per_call": round(1e6 * spent[name] / calls[name], 2) if calls[name] else None}
                  for name in PATHS},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=50, metavar="N", help="sessions at once (default 50)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 2000:
        parser.error(f"--sessions takes 1..2000, not {args.sessions}")
    figures = run_paths(args.sessions)
    print(f"{figures['sessions']} sessions ({figures['failed']} failed): the client {figures['client_us_per_session_s']:.0f} µs "
          f"of CPU per session-second")
    for name, path in sorted(figures["paths"].items(), key=lambda kv: -kv[1]["us_per_session_s"]):
        per_call = "—" if path["us_per_call"] is None else f"{path['us_per_call']:.1f} µs a call"
        print(f"  {name}: {path['us_per_session_s']:.0f} µs per session-second, {path['calls_per_session_s']:.1f} calls, "
              f"{per_call}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
