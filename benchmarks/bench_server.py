"""Server CPU per session-second: N sessions' worth of append frames through the local server's engine.

Each session is one :class:`~voxline.realtime.server.engine.core.Engine` fed the way ``voxline serve``
feeds it, on a virtual time that advances 20 ms per step: one ``input_audio_buffer.append`` of
20 ms (a second of speech-like audio, then two of silence, so server VAD starts and stops turns
and the scenario's reply streams at real-time pace), ``Engine.receive`` then ``Engine.poll`` on
every step, and every server event encoded to JSON text as the transports send it. The client's
frames are encoded once before the timed part (they are the client's cost, not the server's).

The figure is CPU time (this process) per session-second of audio, in ms: 10 ms per
session-second is 1% of one core per real-time session. Two reference rows, measured in the
same run: ``ids`` mints event ids with the ``secrets.choice``-per-character method beside
:class:`~voxline.realtime.server.engine.ids.IdFactory`; ``vad`` runs the energy detector's
per-frame Python loop beside the vectorised :class:`~voxline.audio.vad.EnergyVad`.

Run: ``python3 -m benchmarks.bench_server`` (``--sessions N --seconds S --rounds R``).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import secrets
import string
from typing import Any

import numpy as np

from voxline.audio.vad import EnergyVad
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import parse_scenario
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig

from .common import format_table, ratio, speechlike, time_regions
from .record import add_output_arguments, finish, run_section

__all__ = ["main", "run", "section", "table"]

RATE = 24000
STEP_S = 0.02
PATTERN_S = (1.0, 2.0)  # speech, then silence
REPLY = "Sure, here is a reply long enough to stream for a while."


def _voice(text: str) -> np.ndarray:
    return speechlike(len(text) * RATE // 20, RATE, seed=len(text))


def _frames(seconds: float) -> list[str]:
    """The client's append frames for ``seconds`` of the speech/silence pattern, encoded once."""
    period = sum(PATTERN_S)
    speech = speechlike(int(PATTERN_S[0] * RATE), RATE, seed=1)
    block = int(STEP_S * RATE)
    frames = []
    for i in range(int(round(seconds / STEP_S))):
        t = (i * STEP_S) % period
        offset = int(round(t * RATE))
        chunk = speech[offset:offset + block] if t < PATTERN_S[0] else np.zeros(block, dtype=np.int16)
        audio = base64.b64encode(chunk.astype("<i2").tobytes()).decode("ascii")
        frames.append(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
    return frames


def _engines(sessions: int) -> tuple[list[Engine], list[str]]:
    scenario = parse_scenario({"turns": [{"say": REPLY}]})
    voices = VoiceCache.for_scenario(scenario, _voice)
    config = EngineConfig(pacing=Pacing(speed=1.0, chunk_ms=100))
    engines = [Engine(config, scenario, voices, wall_time=1_700_000_000.0, ids=IdFactory()) for _ in range(sessions)]
    return engines, [json.dumps(ev) for engine in engines for ev in engine.open()]


def serve(sessions: int, frames: list[str]) -> int:
    """Run ``sessions`` engines through ``frames`` in lockstep; return the number of events sent."""
    engines, _opened = _engines(sessions)
    sent = 0
    dumps = json.dumps
    for i, frame in enumerate(frames):
        now = i * STEP_S
        for engine in engines:
            events = engine.receive(frame, now)
            events += engine.poll(now)
            for ev in events:
                dumps(ev)
            sent += len(events)
    return sent


_ALPHABET = string.ascii_letters + string.digits


def _secrets_id(prefix: str, length: int = 21) -> str:
    """How event ids were minted before: one ``secrets.choice`` per character."""
    return f"{prefix}_{''.join(secrets.choice(_ALPHABET) for _ in range(length))}"


def _vad_loop(vad: EnergyVad, samples: np.ndarray, frame: int) -> int:
    """The detector's former shape: levels vectorised, then one Python step per 10 ms frame."""
    frames = samples[: samples.size - samples.size % frame].astype(np.float64).reshape(-1, frame)
    levels = 20.0 * np.log10(np.maximum(np.sqrt(np.mean(frames * frames, axis=1)), 1e-9) / 32768.0)
    speaking, run, quiet, changes = False, 0, 0, 0
    onset, stay = vad.onset_dbfs, vad.onset_dbfs - vad.hysteresis_db
    for level in levels.tolist():
        if not speaking:
            run = run + 1 if level >= onset else 0
            if run >= vad.onset_frames:
                speaking, quiet, changes = True, 0, changes + 1
        elif level >= stay:
            quiet = 0
        else:
            quiet += 1
            if quiet >= vad.silence_frames:
                speaking, run, changes = False, 0, changes + 1
    return changes


def run(sessions: int = 20, seconds: float = 6.0, rounds: int = 3) -> dict[str, Any]:
    frames = _frames(seconds)
    events = serve(sessions, frames)
    cpu, wall = time_regions({"server": lambda: serve(sessions, frames)}, rounds)["server"]
    session_seconds = sessions * seconds
    ids_n = 20_000
    factory = IdFactory()
    id_times = time_regions({
        "secrets.choice": lambda: [_secrets_id("event") for _ in range(ids_n)],
        "IdFactory": lambda: [factory.new("event") for _ in range(ids_n)],
    }, rounds)
    audio = np.tile(np.concatenate([speechlike(RATE, RATE, seed=2), np.zeros(2 * RATE, np.int16)]), 20)
    block = int(STEP_S * RATE)
    blocks = [audio[i:i + block] for i in range(0, audio.size, block)]

    def vectorised() -> None:
        vad = EnergyVad(silence_duration_ms=200)
        for b in blocks:
            vad.process(b)

    def looped() -> None:
        vad = EnergyVad(silence_duration_ms=200)
        for b in blocks:
            _vad_loop(vad, b, vad.frame)

    vad_times = time_regions({"per-frame loop": looped, "EnergyVad": vectorised}, rounds)
    vad_seconds = audio.size / RATE
    return {
        "sessions": sessions,
        "seconds": seconds,
        "rounds": rounds,
        "events_per_pass": events,
        "server": {
            "cpu_ms_per_session_second": round(cpu / 1e6 / session_seconds, 3),
            "wall_ms_per_session_second": round(wall / 1e6 / session_seconds, 3),
            "core_percent_per_session": round(cpu / 1e9 / session_seconds * 100, 3),
            "cpu_us_per_event": round(cpu / 1e3 / max(1, events), 2),
        },
        "ids": {
            "secrets_us_per_id": round(id_times["secrets.choice"][0] / 1e3 / ids_n, 3),
            "factory_us_per_id": round(id_times["IdFactory"][0] / 1e3 / ids_n, 3),
            "speedup": ratio(id_times["secrets.choice"][0], id_times["IdFactory"][0]),
        },
        "vad": {
            "loop_us_per_audio_second": round(vad_times["per-frame loop"][0] / 1e3 / vad_seconds, 2),
            "vectorised_us_per_audio_second": round(vad_times["EnergyVad"][0] / 1e3 / vad_seconds, 2),
            "speedup": ratio(vad_times["per-frame loop"][0], vad_times["EnergyVad"][0]),
        },
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``server`` figures; ``short``: 2 sessions of 1 s, one round."""
    return run(2, 1.0, 1) if short else run()


def table(result: dict[str, Any]) -> str:
    server, ids, vad = result["server"], result["ids"], result["vad"]
    rows = [
        ["server, CPU ms per session-second", f"{server['cpu_ms_per_session_second']:.3f}", ""],
        ["server, % of a core per session", f"{server['core_percent_per_session']:.3f}", ""],
        ["server, CPU µs per event", f"{server['cpu_us_per_event']:.2f}", ""],
        ["ids: secrets.choice / IdFactory, µs per id",
         f"{ids['secrets_us_per_id']:.3f} / {ids['factory_us_per_id']:.3f}", f"{ids['speedup']:.2f}x"],
        ["vad: loop / vectorised, µs per audio-second",
         f"{vad['loop_us_per_audio_second']:.1f} / {vad['vectorised_us_per_audio_second']:.1f}",
         f"{vad['speedup']:.2f}x"],
    ]
    head = f"{result['sessions']} sessions x {result['seconds']:g} s, {result['events_per_pass']} events per pass"
    return format_table([head, "figure", "ratio"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=6.0, help="virtual seconds of audio per session")
    parser.add_argument("--rounds", type=int, default=3)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.sessions <= 0 or not (math.isfinite(args.seconds) and args.seconds > 0) or args.rounds <= 0:
        parser.error("--sessions, --seconds and --rounds must be positive")
    done = run_section(lambda: run(args.sessions, args.seconds, args.rounds), short=False)
    print(table(done["figures"]))
    print(f"({done['measured']['elapsed_s']:.1f} s) written to {finish(args, 'server', done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
