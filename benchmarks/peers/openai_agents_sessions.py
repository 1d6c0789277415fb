"""N openai-agents realtime sessions at once against a server at ``--url``: their CPU per session-second.

Runs in openai-agents' own virtual environment (built by ``.ci/install-clients openai_agents``),
so it imports nothing from voxline. Each session is the SDK's ``RealtimeRunner`` session, as an
application writes it: it streams the WAV at ``--audio`` in real time (40 ms ``send_audio``
chunks, as the floor and voxline send), then silence, and reads every session event until
``--run-s`` seconds have passed. The SDK plays nothing (an application would hand the audio
events to its own player), so this is a client without playout. Tracing is off: nothing leaves
loopback. Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave
from typing import Any

from agents import set_tracing_disabled
from agents.realtime import RealtimeAgent, RealtimeRunner

CHUNK_S = 0.040
RATE = 24_000


async def one(url: str, pcm: bytes, run_s: float, counts: list[int]) -> None:
    runner = RealtimeRunner(starting_agent=RealtimeAgent(name="Assistant", instructions="Answer briefly."))
    session = await runner.run(model_config={"url": f"{url}/realtime?model=gpt-realtime", "api_key": "sk-local"})
    async with session:
        loop = asyncio.get_running_loop()
        start = loop.time()

        async def speak() -> None:
            step = int(CHUNK_S * RATE) * 2
            k = 0
            while loop.time() - start < run_s:
                await asyncio.sleep(max(0.0, start + (k + 1) * CHUNK_S - loop.time()))
                chunk = pcm[k * step:(k + 1) * step] or bytes(step)
                await session.send_audio(chunk)
                k += 1

        speaker = asyncio.create_task(speak())
        try:
            async with asyncio.timeout(run_s):
                async for event in session:
                    counts[0] += 1
                    if event.type == "audio":
                        counts[1] += len(event.audio.data) // 2
        except TimeoutError:
            pass
        speaker.cancel()


async def run_all(n: int, url: str, pcm: bytes, run_s: float) -> tuple[list[BaseException | None], list[int]]:
    counts = [0, 0]  # session events read, audio samples received
    results = await asyncio.gather(*(one(url, pcm, run_s, counts) for _ in range(n)), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results], counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", required=True)
    parser.add_argument("--audio", required=True, help="a 24 kHz mono 16-bit WAV")
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--run-s", type=float, required=True)
    parser.add_argument("--wait-for-start", action="store_true",
                        help="say 'ready' on stderr once set up, then start when a line comes on stdin")
    args = parser.parse_args()
    with wave.open(args.audio, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise SystemExit(f"{args.audio}: expected 24 kHz mono 16-bit PCM")
        pcm = w.readframes(w.getnframes())
    set_tracing_disabled(True)
    # one short session first: what a process does once (imports on first use, the first connection) is not a
    # cost of the N sessions measured next, as voxline's sessions and the bare receivers are measured too
    asyncio.run(run_all(1, args.url, pcm[: RATE], 0.5))
    if args.wait_for_start:  # started beside another client, from one signal once both are ready
        print("ready", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no start signal came: nothing measured")
    began = time.time()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    failures, counts = asyncio.run(run_all(args.sessions, args.url, pcm, args.run_s))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    failed = [f"{type(e).__name__}: {e}"[:200] for e in failures if e is not None]
    session_s = args.run_s * (args.sessions - len(failed))
    out: dict[str, Any] = {
        "client": "openai-agents",
        "sessions": args.sessions,
        "failed": len(failed),
        "failures": sorted(set(failed))[:3],
        "events_read": counts[0],
        "audio_s_received": round(counts[1] / RATE, 1),
        "session_seconds": round(session_s, 2),
        "wall_s": round(wall1 - wall0, 2),
        "client_cpu_s": round(cpu1 - cpu0, 3),
        "client_cpu_per_session_s": round((cpu1 - cpu0) / session_s, 5) if session_s > 0 else float("nan"),
        "began_at": round(began, 3),
        "ended_at": round(time.time(), 3),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
