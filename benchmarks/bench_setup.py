"""Session setup: how long until a voxline session is ready, against a bare connection to the same server.

*Ready* is what an application waits for before it talks: ``async with VoiceSession(...)`` has
returned and the server's ``session.updated`` for the session's configuration has arrived. The
baseline, measured in the same run and interleaved with it, is the floor of the same server: a
bare connection that reads the first frame (``session.created``) and does nothing else. Servers:

* **engine** -- the local server's engine in this process, no socket
  (:class:`~voxline.realtime.server.net.inprocess.EngineTransport`, as ``voxline replay --fast``);
  the bare connection is the transport alone;
* **server** -- the local server (:func:`voxline.realtime.server.serve`) in this process, over
  loopback WebSocket; the bare connection is ``websockets.connect`` + one ``recv``;
* **serve** -- ``voxline serve`` in another process, over loopback WebSocket; same baseline.

A fourth figure is the start of ``voxline serve`` itself (process start to its URL printed)
against the start of a bare ``python -c pass``. Times are wall clock (``time.perf_counter``),
median and p90 over the repetitions. Run: ``python3 -m benchmarks.bench_setup``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from websockets.asyncio.client import connect as ws_connect

from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server import Engine, EngineConfig, ServerConfig, load_scenario, serve
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.net.inprocess import EngineTransport
from voxline.realtime.transports.websocket import realtime_url
from voxline.session.voice import VoiceSession

from .concurrent_sessions import SCENARIO, VOICE, Server, settings_for
from .common import ratio
from .record import add_output_arguments, measure_and_report

__all__ = ["main", "run", "section", "table"]

Timed = Callable[[], Awaitable[None]]


def _ms(values: list[float]) -> dict[str, float]:
    ms = np.asarray(values) * 1000.0
    return {"median_ms": round(float(np.median(ms)), 3), "p90_ms": round(float(np.percentile(ms, 90)), 3), "n": len(values)}


async def _ready(session: VoiceSession, ready: asyncio.Event) -> None:
    async with session:
        await ready.wait()


def _voxline(make: Callable[[Callable[[str, str], None]], VoiceSession]) -> Timed:
    """A timed attempt: a VoiceSession from nothing to ``session.updated`` received, then closed (untimed)."""
    async def attempt() -> None:
        ready = asyncio.Event()

        def seen(direction: str, text: str) -> None:
            if direction == "in" and '"session.updated"' in text:
                ready.set()

        await _ready(make(seen), ready)

    return attempt


def _bare_ws(url: str) -> Timed:
    async def attempt() -> None:
        headers = {"Authorization": "Bearer local"}
        async with ws_connect(realtime_url(url, model=settings_for(url).model), additional_headers=headers,
                              compression=None) as ws:
            first = await ws.recv()
            assert '"session.created"' in str(first), first

    return attempt


async def _timed(attempt: Timed) -> float:
    start = time.perf_counter()
    await attempt()
    return time.perf_counter() - start


async def _pair(voxline: Timed, bare: Timed, repetitions: int) -> dict[str, Any]:
    """Interleave the two attempts ``repetitions`` times after one untimed warm-up of each."""
    await voxline()
    await bare()
    times: dict[str, list[float]] = {"voxline": [], "bare": []}
    for _ in range(repetitions):
        times["voxline"].append(await _timed(voxline))
        times["bare"].append(await _timed(bare))
    v, b = _ms(times["voxline"]), _ms(times["bare"])
    return {"voxline_ready": v, "bare_first_frame": b, "voxline_over_bare": ratio(v["median_ms"], b["median_ms"])}


async def _engine(repetitions: int) -> dict[str, Any]:
    clock = RealClock()
    scenario = load_scenario(SCENARIO)
    synth, _name = make_synth(VOICE)
    voices = warm_up(scenario, synth)

    def engine() -> Engine:
        return Engine(EngineConfig(pacing=Pacing(speed=1.0)), scenario, voices, wall_time=clock.wall())

    def session(seen: Callable[[str, str], None]) -> VoiceSession:
        async def connector() -> RealtimeConnection:
            return RealtimeConnection(EngineTransport(engine(), clock, synth), on_wire=seen)

        return VoiceSession(settings_for("ws://local"), clock=clock, connector=connector)

    async def bare() -> None:
        transport = EngineTransport(engine(), clock, synth)
        first = await transport.recv()
        assert '"session.created"' in first, first
        await transport.close()

    return await _pair(_voxline(session), bare, repetitions)


def _url_session(url: str) -> Callable[[Callable[[str, str], None]], VoiceSession]:
    def session(seen: Callable[[str, str], None]) -> VoiceSession:
        return VoiceSession(settings_for(url), on_wire=seen)

    return session


async def _in_process_server(repetitions: int) -> dict[str, Any]:
    async with serve(ServerConfig(port=0, voice=VOICE, scenario=SCENARIO)) as server:
        return await _pair(_voxline(_url_session(server.url)), _bare_ws(server.url), repetitions)


async def _serve_process(url: str, repetitions: int) -> dict[str, Any]:
    return await _pair(_voxline(_url_session(url)), _bare_ws(url), repetitions)


def _process_starts(repetitions: int) -> dict[str, Any]:
    """``voxline serve`` from exec to listening, against ``python -c pass``."""
    serve_s, python_s = [], []
    for _ in range(repetitions):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        with Server():
            serve_s.append(time.perf_counter() - start)
    s, p = _ms(serve_s), _ms(python_s)
    return {"serve_listening": s, "bare_python": p, "serve_over_python": ratio(s["median_ms"], p["median_ms"])}


def run(repetitions: int = 30, starts: int = 3) -> dict[str, Any]:
    """Measure every server: the figures of the ``setup`` section."""
    engine = asyncio.run(_engine(repetitions))
    in_process = asyncio.run(_in_process_server(repetitions))
    with Server() as server:
        other = asyncio.run(_serve_process(server.url, repetitions))
    process = _process_starts(starts)
    return {
        "benchmark": "session setup",
        "method": "wall time from VoiceSession() to session.updated received, against a bare connection's first "
                  f"frame on the same server; interleaved, median and p90 of {repetitions}",
        "repetitions": repetitions,
        "servers": {"engine": engine, "server": in_process, "serve": other},
        "serve_start": process,
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``setup`` figures; ``short``: 5 repetitions, one server start."""
    return run(5, 1) if short else run()


def table(result: dict[str, Any]) -> str:
    labels = {"engine": "in-process engine (no socket)", "server": "local server in this process (loopback WS)",
              "serve": "voxline serve process (loopback WS)"}
    lines = ["session setup, ms (median / p90)", f"{'server':44} {'voxline ready':>16} {'bare 1st frame':>16} {'ratio':>6}"]
    for name, row in result["servers"].items():
        v, b = row["voxline_ready"], row["bare_first_frame"]
        lines.append(f"{labels[name]:44} {v['median_ms']:7.2f} / {v['p90_ms']:6.2f} {b['median_ms']:7.2f} / "
                     f"{b['p90_ms']:6.2f} {row['voxline_over_bare']:5.2f}x")
    s = result["serve_start"]
    lines.append(f"voxline serve start to listening: {s['serve_listening']['median_ms']:.0f} ms, python -c pass "
                 f"{s['bare_python']['median_ms']:.0f} ms ({s['serve_over_python']}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repetitions", type=int, default=30, help="timed setups per server")
    parser.add_argument("--starts", type=int, default=3, help="timed starts of voxline serve")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.repetitions <= 0 or args.starts <= 0:
        parser.error("--repetitions and --starts must be positive")
    measure_and_report(args, "setup", lambda: run(args.repetitions, args.starts), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
