"""What each scale lever saves, measured alone on a fixed workload, old and new in alternating rounds.

The concurrent benchmark's CPU per session moves with the machine's load by more than the
levers do (a loaded loop batches more work per wake-up). Here every lever is measured on work
that does not depend on timing, in rounds that alternate the former path and the new one within
a second of each other, so both see the same load; the figure is the median CPU per unit of
each, and their ratio.

* ``tick``: a lockstep replay of ``barge_in.wav`` over the ``long`` scenario, its output ticking
  the session after every pass (former) or only past the core's quiet horizon (the tick gate);
  CPU µs per output pass, its tick included;
* ``idle``: the same replay writing its heard WAV, the output passing every block (former) or sleeping
  while nothing can play (``idle_s``); CPU µs of the whole replay per second of the session;
* ``receive``: a loopback WebSocket streaming a reply's frames in pairs (transcript + audio
  delta, as the server writes them) into a ``RealtimeConnection``; every frame through
  websockets' ``recv()`` (former) or frames already read taken as they are (``try_recv``);
  CPU µs per frame of the whole process (the sending side is the same in both);
* ``encode``: the local server's engine streaming a cached reply, its wire form and chunks'
  base64 made for each response (former) or once for all (``VoiceCache.wire``); CPU µs per
  response;
* ``json``: the local server's events of a long reply as JSON text, ``json.dumps`` of each (former)
  or with the cached base64 of the audio deltas spliced in (``encode_event``); CPU µs per event;
* ``outbox``: the server's events onto a loopback WebSocket, through the writer task (former,
  forced by a fault that never fires) or written at once in one socket write per batch; CPU µs
  per event of the whole process;
* ``check``: the local server's engine taking ``barge_in.wav`` as 40 ms ``input_audio_buffer.append``
  frames, each through the full schema check (former) or passed by a glance at its keys and kinds
  (``PLAIN_EVENTS``); CPU µs per append, parsing, VAD and buffering included.

Run: ``python3 -m benchmarks.bench_levers`` (``--rounds R``, default 7).
"""

from __future__ import annotations

import argparse
import base64
import asyncio
import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.server import serve as ws_serve

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.sinks import WavSink
from voxline.audio.wavio import read_wav
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server.engine import Engine, core
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import make_synth
from voxline.realtime.server.engine.wire_json import encode_event
from voxline.realtime.server.net.config import FaultConfig, ServerConfig
from voxline.realtime.server.net.ws_session import Outbox
from voxline.realtime.transports.websocket import WebSocketTransport
from voxline.session.replay import replay_fast
from voxline.session.voice import VoiceSession

from .concurrent_sessions import RATE, RECORDING
from .concurrent_levers import AlwaysOpenGate
from .record import add_output_arguments, finish, run_section

__all__ = ["main", "run"]

_VOICES: dict[str, VoiceCache] = {}


def _voices() -> VoiceCache:
    if "long" not in _VOICES:
        _VOICES["long"] = VoiceCache.for_scenario(load_scenario("long"), make_synth("tone")[0])
    return _VOICES["long"]


def _reply_events(voices: VoiceCache) -> list[dict[str, Any]]:
    """The local server's events for one long reply, all at once."""
    engine = Engine(EngineConfig(pacing=Pacing(speed=math.inf)), load_scenario("long"), voices, wall_time=1.7e9)
    engine.open()
    return engine.receive(json.dumps({"type": "response.create"}), 0.0) + engine.poll(0.0)


def _tick_round(gated: bool, samples: npt.NDArray[np.int16]) -> float:
    """CPU seconds per output pass (its tick included) of a lockstep replay over a long reply."""
    spent = [0.0, 0]

    def timed(session: VoiceSession) -> None:
        if not gated:
            session.machine.tick_gate = AlwaysOpenGate()
        output = session.output
        assert isinstance(output, ClockedOutput)
        step = output._pass

        def timed_pass(now: float) -> float:
            start = time.process_time()
            due = step(now)
            spent[0] += time.process_time() - start
            spent[1] += 1
            return due

        output._pass = timed_pass  # type: ignore[method-assign]

    replay_fast(samples, scenario=load_scenario("long"), voice="tone", tail_s=2.0, on_session=timed)
    return spent[0] / max(1, int(spent[1]))


def _idle_round(sleeps: bool, samples: npt.NDArray[np.int16]) -> float:
    """CPU seconds per session second of a lockstep replay over a long reply, its heard WAV written."""
    def former(session: VoiceSession) -> None:
        if not sleeps and isinstance(session.output, ClockedOutput):
            session.output._idle_s = 0.0

    with tempfile.TemporaryDirectory(prefix="voxline-levers-") as tmp, WavSink(Path(tmp) / "heard.wav") as sink:
        start = time.process_time()
        result = replay_fast(samples, scenario=load_scenario("long"), voice="tone", tail_s=2.0, sink=sink,
                             on_session=former)
        spent = time.process_time() - start
    return spent / result.duration_s


async def _receive_round(try_recv: bool, frames: list[str]) -> float:
    """CPU seconds per frame received over loopback, in pairs."""
    async def stream(ws: Any) -> None:
        await ws.recv()
        for k in range(0, len(frames), 2):  # two frames per socket write, as the local server writes them
            await ws.send(frames[k])
            if k + 1 < len(frames):
                await ws.send(frames[k + 1])
        await ws.wait_closed()

    server = await ws_serve(stream, "127.0.0.1", 0, compression=None, max_size=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "local", open_timeout=10)
        if not try_recv:
            transport._messages = None  # every frame through websockets' recv()
        conn = RealtimeConnection(transport)
        start = time.process_time()
        await transport.send("go")
        for _ in range(len(frames)):
            await conn.recv()
        spent = time.process_time() - start
        await conn.close()
    finally:
        server.close()
        await server.wait_closed()
    return spent / len(frames)


def _encode_round(shared: bool, voices: VoiceCache, responses: int = 20) -> float:
    """CPU seconds per streamed response of the engine (its events built, not sent)."""
    start = time.process_time()
    for _ in range(responses):
        if not shared:
            voices._wire.clear()  # the wire form and its chunks made for this response, as each used to be
        _reply_events(voices)
    return (time.process_time() - start) / responses


def _json_round(spliced: bool, events: list[dict[str, Any]], repeat: int = 5) -> float:
    """CPU seconds per server event encoded as JSON text."""
    encode = encode_event if spliced else json.dumps
    start = time.process_time()
    for _ in range(repeat):
        for event in events:
            encode(event)
    return (time.process_time() - start) / (repeat * len(events))


async def _outbox_round(direct: bool, events: list[dict[str, Any]]) -> float:
    """CPU seconds per event written by the server's outbox over loopback."""
    done = asyncio.Event()
    config = ServerConfig() if direct else ServerConfig(faults=FaultConfig(close_after_events=10**9))
    spent: list[float] = []

    async def serve_one(ws: Any) -> None:
        outbox = Outbox(ws, config)
        writer = asyncio.create_task(outbox.run())
        await ws.recv()
        start = time.process_time()
        for k in range(0, len(events), 2):
            outbox.put_all(events[k: k + 2])
            await asyncio.sleep(0)
        await outbox.flush()
        await done.wait()
        spent.append(time.process_time() - start)
        writer.cancel()

    server = await ws_serve(serve_one, "127.0.0.1", 0, compression=None, max_size=None)
    try:
        port = server.sockets[0].getsockname()[1]
        async with ws_connect(f"ws://127.0.0.1:{port}", max_size=None, compression=None) as ws:
            await ws.send("go")
            for _ in range(len(events)):
                await ws.recv()
            done.set()
            while not spent:
                await asyncio.sleep(0.001)
    finally:
        server.close()
        await server.wait_closed()
    return spent[0] / len(events)


def _append_frames(samples: npt.NDArray[np.int16]) -> list[str]:
    block = 40 * RATE // 1000
    return [json.dumps({"type": "input_audio_buffer.append", "event_id": f"event_{k}",
                        "audio": base64.b64encode(samples[k: k + block].tobytes()).decode("ascii")})
            for k in range(0, len(samples), block)]


def _check_round(glance: bool, voices: VoiceCache, frames: list[str], repeat: int = 3) -> float:
    """CPU seconds per append frame taken by the engine."""
    saved = dict(core.PLAIN_EVENTS)
    if not glance:
        core.PLAIN_EVENTS.clear()  # every event through the full check, as every event went
    try:
        start = time.process_time()
        for _ in range(repeat):
            engine = Engine(EngineConfig(), load_scenario("long"), voices, wall_time=1.7e9)
            engine.open()
            for k, frame in enumerate(frames):
                engine.receive(frame, k * 0.04)
        spent = time.process_time() - start
    finally:
        core.PLAIN_EVENTS.update(saved)
    return spent / (repeat * len(frames))


def _alternate(rounds: int, former: Callable[[], float], new: Callable[[], float], unit: str) -> dict[str, Any]:
    olds, news = [], []
    for _ in range(rounds):
        olds.append(former())
        news.append(new())
    old, now = statistics.median(olds), statistics.median(news)
    return {"unit": unit, "former_us": round(old * 1e6, 2), "new_us": round(now * 1e6, 2),
            "new_over_former": round(now / old, 3) if old > 0 else math.nan,
            "rounds_former_us": [round(x * 1e6, 2) for x in olds], "rounds_new_us": [round(x * 1e6, 2) for x in news]}


def run(rounds: int = 7) -> dict[str, Any]:
    voices = _voices()
    samples, _rate = read_wav(RECORDING)
    events = _reply_events(voices)
    frames = [json.dumps(e) for e in events]
    appends = _append_frames(samples)
    result = {
        "tick": _alternate(rounds, lambda: _tick_round(False, samples), lambda: _tick_round(True, samples), "per pass"),
        "idle": _alternate(rounds, lambda: _idle_round(False, samples), lambda: _idle_round(True, samples),
                           "per session second"),
        "receive": _alternate(rounds, lambda: asyncio.run(_receive_round(False, frames * 3)),
                              lambda: asyncio.run(_receive_round(True, frames * 3)), "per frame"),
        "encode": _alternate(rounds, lambda: _encode_round(False, voices), lambda: _encode_round(True, voices),
                             "per response"),
        "json": _alternate(rounds, lambda: _json_round(False, events), lambda: _json_round(True, events), "per event"),
        "outbox": _alternate(rounds, lambda: asyncio.run(_outbox_round(False, events * 3)),
                             lambda: asyncio.run(_outbox_round(True, events * 3)), "per event"),
        "check": _alternate(rounds, lambda: _check_round(False, voices, appends),
                            lambda: _check_round(True, voices, appends), "per append"),
    }
    return {"benchmark": "levers", "rounds": rounds, "reply_events": len(events), "levers": result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds of each lever (default 7)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds takes a count of at least 1")
    if args.write_results:
        parser.error("the lever figures go to --out FILE (or the terminal); the tracked file has no section for them")
    done = run_section(lambda: run(args.rounds), short=False)
    for name, lever in done["figures"]["levers"].items():
        print(f"{name:8s} former {lever['former_us']:9.2f} µs  new {lever['new_us']:9.2f} µs  {lever['unit']}  "
              f"(new/former {lever['new_over_former']})")
    print(f"load {done['measured']['load_before']} → {done['measured']['load_after']}")
    if args.out is not None:
        finish(args, "levers", done)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
