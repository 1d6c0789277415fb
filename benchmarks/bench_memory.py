"""Memory: resident set per open session, and bytes held per second of audio a session has played.

* **RSS per ready session** -- N voxline sessions opened at once against ``voxline serve`` in
  another process and left idle once ready (``session.updated`` received): this process's
  resident set (``/proc/self/statm``) when all are ready minus the one before, over N. The
  baseline, measured in the same run, is N bare WebSocket connections to the same server that
  read their ``session.created``. Each side runs in a fresh Python process so that one's freed
  memory does not serve the other.
* **bytes per audio-second** -- lockstep replays (``voxline replay --fast``) of
  ``examples/audio/barge_in.wav`` repeated 1, 2 and 4 times (more turns, more barge-ins) under
  ``tracemalloc``: the peak traced while the session ran and what the finished
  :class:`~voxline.session.replay.result.ReplayResult` keeps, each fitted as a line against the
  session's duration. The slope is what a session holds per second of audio; the baseline is the
  audio itself, 24 kHz 16-bit mono PCM (48 000 bytes per second).
* **peak RSS by recording length** -- ``voxline replay --fast`` (the installed command, a
  fresh process each) of recordings made by repeating ``barge_in.wav`` to 1, 10 and 60 minutes:
  the peak resident set (the child's ``rusage``) of each, its growth over the shortest one's (the
  baseline, measured in the same run), and the throughput, audio seconds per CPU second.

Run: ``python3 -m benchmarks.bench_memory`` (``--sessions N``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import connect as ws_connect

from voxline.audio.wavio import read_wav, write_wav
from voxline.realtime.server import load_scenario
from voxline.realtime.transports.websocket import realtime_url
from voxline.session.replay import replay_fast
from voxline.session.voice import VoiceSession

from .concurrent_sessions import RECORDING, SCENARIO, VOICE, Server, rss_bytes, settings_for
from .common import peak_rss_run, ratio
from .record import ROOT, add_output_arguments, measure_and_report

__all__ = ["PCM_BYTES_PER_S", "held_per_audio_second", "main", "peak_rss_by_length", "rss_per_session", "run",
           "section", "table"]

PCM_BYTES_PER_S = 24_000 * 2


# ------------------------------------------------------------------ RSS per ready session
async def _open_voxline(url: str, n: int) -> int:
    async def one(stack: list[VoiceSession]) -> None:
        ready = asyncio.Event()
        session = VoiceSession(settings_for(url), on_wire=lambda d, t: ready.set() if d == "in" and '"session.updated"' in t else None)
        await session.__aenter__()
        stack.append(session)
        await ready.wait()

    sessions: list[VoiceSession] = []
    gc.collect()
    before = rss_bytes()
    try:
        await asyncio.gather(*(one(sessions) for _ in range(n)))
        gc.collect()
        return rss_bytes() - before
    finally:
        await asyncio.gather(*(s.aclose() for s in sessions))


async def _open_bare(url: str, n: int) -> int:
    connections: list[Any] = []

    async def one() -> None:
        ws = await ws_connect(realtime_url(url, model=settings_for(url).model),
                              additional_headers={"Authorization": "Bearer local"}, compression=None)
        connections.append(ws)
        assert '"session.created"' in str(await ws.recv())

    gc.collect()
    before = rss_bytes()
    try:
        await asyncio.gather(*(one() for _ in range(n)))
        gc.collect()
        return rss_bytes() - before
    finally:
        await asyncio.gather(*(ws.close() for ws in connections))


async def _warm(url: str, kind: str) -> None:
    """One session of ``kind`` opened and closed first, so that imports and first-use caches are not billed."""
    await (_open_voxline(url, 1) if kind == "voxline" else _open_bare(url, 1))


def _child(kind: str, url: str, n: int) -> None:
    """In a fresh process: the RSS growth of ``n`` ready connections of ``kind``, as JSON on stdout."""
    async def measure() -> int:
        await _warm(url, kind)
        return await (_open_voxline(url, n) if kind == "voxline" else _open_bare(url, n))

    print(json.dumps({"kind": kind, "sessions": n, "rss_growth_bytes": asyncio.run(measure())}))


def _in_child(kind: str, url: str, n: int) -> int:
    code = f"from benchmarks.bench_memory import _child; _child({kind!r}, {url!r}, {n})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the {kind} memory run failed: {done.stderr.strip().splitlines()[-1:]}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["rss_growth_bytes"])


def rss_per_session(n: int) -> dict[str, Any]:
    with Server() as server:
        voxline = _in_child("voxline", server.url, n)
        bare = _in_child("bare", server.url, n)
    return {
        "sessions": n,
        "voxline_kib_per_session": round(voxline / n / 1024, 1),
        "bare_kib_per_connection": round(bare / n / 1024, 1),
        "voxline_over_bare": ratio(voxline, bare),
    }


# ------------------------------------------------------------------ bytes per audio-second
def held_per_audio_second(repeats: tuple[int, ...]) -> dict[str, Any]:
    samples, rate = read_wav(RECORDING)
    scenario = load_scenario(SCENARIO)

    def replay(k: int) -> Any:
        return replay_fast(np.tile(samples, k), scenario=scenario, settings=settings_for("ws://local"), voice=VOICE,
                           tail_s=2.0)

    replay(1)  # warm-up: first-use caches (the voice, pydantic's validators) are not per audio-second
    rows = []
    for k in repeats:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        result = replay(k)
        peak = tracemalloc.get_traced_memory()[1]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        rows.append({"repeats": k, "duration_s": round(result.duration_s, 2), "barge_ins": len(result.barge_ins),
                     "peak_bytes": peak - base, "kept_bytes": kept - base, "heard_bytes": int(result.heard.nbytes)})
        del result
    duration = [r["duration_s"] for r in rows]

    def slope(key: str) -> float:
        return float(np.polyfit(duration, [r[key] for r in rows], 1)[0])

    peak, kept = slope("peak_bytes"), slope("kept_bytes")
    return {
        "recording": RECORDING.name,
        "runs": rows,
        "peak_bytes_per_audio_s": round(peak),
        "kept_bytes_per_audio_s": round(kept),
        "heard_bytes_per_audio_s": round(slope("heard_bytes")),
        "pcm_bytes_per_audio_s": PCM_BYTES_PER_S,
        "peak_over_pcm": ratio(peak, PCM_BYTES_PER_S),
        "kept_over_pcm": ratio(kept, PCM_BYTES_PER_S),
        "kept_mib_per_audio_hour": round(kept * 3600 / 2**20, 1),
    }


# ------------------------------------------------------------------ peak RSS by recording length
def _replay_rusage(recording: Path, folder: Path) -> tuple[int, float]:
    """``voxline replay --fast`` of ``recording`` in a fresh process: its peak RSS (bytes) and CPU seconds."""
    voxline = Path(sys.executable).parent / "voxline"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_")}
    done, peak_kib, cpu = peak_rss_run([str(voxline), "replay", str(recording), "--fast", "--voice", VOICE, "--out",
                                        str(folder / "heard.wav"), "--events", str(folder / "events.jsonl")],
                                       cwd=folder, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the replay of {recording.name} failed: {done.stderr.strip()[-300:]}")
    return peak_kib * 1024, cpu


def peak_rss_by_length(minutes: tuple[float, ...]) -> dict[str, Any]:
    samples, rate = read_wav(RECORDING)
    rows = []
    with tempfile.TemporaryDirectory(prefix="voxline-bench-memory-") as tmp:
        folder = Path(tmp)
        for m in minutes:
            n = round(m * 60 * rate)
            recording = folder / f"{m:g}min.wav"
            write_wav(recording, np.tile(samples, -(-n // len(samples)))[:n], rate)
            peak, cpu = _replay_rusage(recording, folder)
            recording.unlink()
            rows.append({"minutes": m, "peak_rss_mib": round(peak / 2**20, 1), "cpu_s": round(cpu, 2),
                         "audio_s_per_cpu_s": round(m * 60 / cpu, 1)})
    first, last = rows[0], rows[-1]
    growth = last["peak_rss_mib"] - first["peak_rss_mib"]
    return {
        "recording": RECORDING.name,
        "runs": rows,
        "growth_mib": round(growth, 1),  # the longest recording's peak over the shortest one's
        "growth_mib_per_audio_hour": round(growth * 60 / (last["minutes"] - first["minutes"]), 1),
        "pcm_mib_of_longest": round(last["minutes"] * 60 * PCM_BYTES_PER_S / 2**20, 1),
    }


def run(sessions: int = 100, repeats: tuple[int, ...] = (1, 2, 4),
        minutes: tuple[float, ...] = (1, 10, 60)) -> dict[str, Any]:
    """Measure all three: the figures of the ``memory`` section."""
    return {
        "benchmark": "memory",
        "rss_per_ready_session": rss_per_session(sessions),
        "held_per_audio_second": held_per_audio_second(repeats),
        "peak_rss_by_length": peak_rss_by_length(minutes),
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``memory`` figures; ``short``: 100 sessions (fewer can fit in memory the allocator already
    holds), the recording once and twice, half a minute and one."""
    return run(100, (1, 2), (0.5, 1)) if short else run()


def table(result: dict[str, Any]) -> str:
    r, h = result["rss_per_ready_session"], result["held_per_audio_second"]
    by_length = result.get("peak_rss_by_length")
    lengths = [] if by_length is None else [
        "replay --fast peak RSS by recording length: " + ", ".join(
            f"{x['minutes']:g} min {x['peak_rss_mib']} MiB ({x['audio_s_per_cpu_s']} audio-s per CPU-s)"
            for x in by_length["runs"]) + f"; growth {by_length['growth_mib']} MiB"]
    return "\n".join([*lengths,
        f"RSS per ready session ({r['sessions']} at once): voxline {r['voxline_kib_per_session']} KiB, bare WebSocket "
        f"{r['bare_kib_per_connection']} KiB ({r['voxline_over_bare']}x)",
        f"held per audio-second: peak {h['peak_bytes_per_audio_s']} B, kept in the result {h['kept_bytes_per_audio_s']} B "
        f"({h['kept_mib_per_audio_hour']} MiB per audio-hour); PCM is {h['pcm_bytes_per_audio_s']} B "
        f"(peak {h['peak_over_pcm']}x, kept {h['kept_over_pcm']}x)",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=50, help="sessions opened at once for the RSS figure")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.sessions <= 0:
        parser.error("--sessions must be positive")
    measure_and_report(args, "memory", lambda: run(args.sessions), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
