"""``voxline replay INPUT.wav``: recorded audio in, heard audio out, every wire event logged.

Without ``--url`` it runs against the built-in local server (in-process, on loopback, or in
lockstep on a virtual clock with ``--fast``). With ``--url`` it talks to that server, using
``OPENAI_API_KEY`` as the token.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from voxline.base.clock import RealClock, VirtualClock
from voxline.audio.resample import StreamResampler
from voxline.audio.wavio import read_wav, write_wav
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.app import serve
from voxline.realtime.server.config import ServerConfig
from voxline.realtime.server.scenario import load_scenario

from ..eventlog import EventLog
from ..replay import ReplayResult, run_lockstep, run_realtime
from ..track_audio import TrackTagger

__all__ = ["add_arguments", "run"]

RATE = 24_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, metavar="INPUT.wav", help="recording to use as the microphone")
    parser.add_argument("--out", type=Path, required=True, metavar="HEARD.wav",
                        help="what the listener heard, sample-aligned with the input (PCM16 mono 24 kHz)")
    parser.add_argument("--events", type=Path, required=True, metavar="EVENTS.jsonl", help="wire event log")
    parser.add_argument("--url", help="Realtime API base URL (default: the built-in local server)")
    parser.add_argument("--transport", choices=["ws", "webrtc"], default="ws",
                        help="wire transport (default ws); over webrtc the server owns the output buffer and cuts itself")
    parser.add_argument("--fast", action="store_true",
                        help="built-in server only: run in lockstep on a virtual clock, faster than real time")
    parser.add_argument("--scenario", default="long", help="built-in server scenario: a name or a TOML file")
    parser.add_argument("--voice", default="auto", help="built-in server voice: auto, espeak or tone")
    parser.add_argument("--model", default="gpt-realtime")
    parser.add_argument("--vad-threshold", type=float, default=0.5)
    parser.add_argument("--silence-ms", type=int, default=500)


def session_config(args: argparse.Namespace) -> dict[str, Any]:
    vad = {"type": "server_vad", "threshold": args.vad_threshold, "prefix_padding_ms": 300,
           "silence_duration_ms": args.silence_ms, "create_response": True, "interrupt_response": True}
    return {"type": "realtime", "output_modalities": ["audio"],
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": RATE}, "turn_detection": vad},
                      "output": {"format": {"type": "audio/pcm", "rate": RATE}}}}


def load_input(path: Path) -> np.ndarray:
    """The recording as int16 mono at 24 kHz (other rates are resampled, channels averaged)."""
    samples, rate = read_wav(path)
    if rate != RATE:
        print(f"voxline: resampling {path} from {rate} Hz to {RATE} Hz", file=sys.stderr)
        samples = StreamResampler(rate, RATE).process(samples, last=True)
    if len(samples) == 0:
        raise ConfigurationError(f"{path} holds no audio")
    return samples


async def run(args: argparse.Namespace) -> int:
    if args.fast and args.url:
        raise ConfigurationError("--fast runs against the built-in server only; drop --url or --fast")
    if args.fast and args.transport == "webrtc":
        raise ConfigurationError("--fast runs in lockstep without media tracks; it cannot use --transport webrtc")
    for path in (args.out, args.events):
        if not path.parent.is_dir():
            raise ConfigurationError(f"cannot write {path}: no such directory {path.parent}")
    samples = load_input(args.input)
    if args.fast:
        virtual = VirtualClock()
        with contextlib.closing(EventLog(args.events, virtual.now)) as log:
            result = run_lockstep(samples, scenario=load_scenario(args.scenario), session=session_config(args),
                                  voice=args.voice, on_wire=log.wire, clock=virtual)
            for event in result.events:
                log.local(event, getattr(event, "at", None))
    else:
        clock = RealClock()
        start = clock.now()
        with contextlib.closing(EventLog(args.events, lambda: clock.now() - start)) as log:
            result = await _realtime(args, samples, log, clock)
            for event in result.events:
                log.local(event, getattr(event, "at", None))
    write_wav(args.out, result.heard, RATE)
    _print_summary(args, result)
    return 0


async def _realtime(args: argparse.Namespace, samples: np.ndarray, log: EventLog, clock: RealClock) -> ReplayResult:
    if args.url:
        token = os.environ.get("OPENAI_API_KEY")
        if not token:
            raise ConfigurationError("OPENAI_API_KEY is not set (needed with --url)")
        return await _replay_over(args, args.url, token, samples, log, clock)
    config = ServerConfig(port=0, scenario=args.scenario, voice=args.voice)
    async with serve(config) as server:
        print(f"voxline: using the built-in local server at {server.url} (scripted replies, energy VAD; "
              "it does not understand speech)", file=sys.stderr)
        return await _replay_over(args, server.url, "local", samples, log, clock)


async def _replay_over(args: argparse.Namespace, url: str, token: str, samples: np.ndarray, log: EventLog,
                       clock: RealClock) -> ReplayResult:
    if args.transport == "webrtc":
        tagger = TrackTagger(PlayoutBuffer())
        transport = await WebRTCTransport.connect(url, token, model=args.model, on_audio=tagger.on_audio)
        conn = RealtimeConnection(transport, on_wire=log.wire)
        return await run_realtime(conn, samples, session=session_config(args), clock=clock, track=tagger)
    conn = await connect(url, token, model=args.model, on_wire=log.wire)
    return await run_realtime(conn, samples, session=session_config(args), clock=clock)


def _print_summary(args: argparse.Namespace, result: ReplayResult) -> None:
    mode = "lockstep, virtual clock" if args.fast else f"real time over {args.transport}, {args.url or 'built-in server'}"
    print(f"replayed {args.input} ({mode})")
    for line in result.summary_lines():
        print("  " + line)
    print(f"  underruns: {result.underrun_events} ({result.underrun_samples / RATE * 1000:.0f} ms)")
    print(f"wrote {args.out} ({len(result.heard) / RATE:.2f} s) and {args.events}")
