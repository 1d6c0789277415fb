"""``voxline replay INPUT.wav``: recorded audio in, heard audio out, every wire event logged.

Without ``--url`` it runs against the built-in local server (in-process, on loopback, or in
lockstep on a virtual clock with ``--fast``). With ``--url`` it talks to that server, using
``OPENAI_API_KEY`` as the token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from voxline.audio.aec import make_canceller
from voxline.audio.local_vad import LocalVad
from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.audio.resample import StreamResampler
from voxline.audio.room import RoomEcho, parse_echo
from voxline.audio.sinks import WavSink
from voxline.audio.wavio import read_wav
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock, VirtualClock
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.app import serve
from voxline.realtime.server.config import ServerConfig
from voxline.realtime.server.scenario import load_scenario, read_transcripts, with_transcripts

from ..eventlog import EventLog
from ..local_barge import BargePolicy
from ..events import SessionError
from ..report import make_run, write_report
from ..lockstep import LockstepLoop
from ..replay import ReplayResult, engine_connector, run_replay
from ..settings import SessionSettings
from ..tools import ToolRegistry

__all__ = ["add_arguments", "load_tools", "loop_factory", "run"]

RATE = SAMPLE_RATE


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
    parser.add_argument("--tools", metavar="MODULE:ATTR",
                        help="a ToolRegistry (e.g. mytools:registry) to run the calls the server makes")
    parser.add_argument("--scenario", default="long", help="built-in server scenario: a name or a TOML file")
    parser.add_argument("--voice", default="auto", help="built-in server voice: auto, espeak or tone")
    parser.add_argument("--model", default=DEFAULT_REALTIME_MODEL,
                        help=f"Realtime model to ask for (default {DEFAULT_REALTIME_MODEL})")
    parser.add_argument("--vad-threshold", type=float, default=0.5, help="server VAD threshold, 0 to 1 (default 0.5)")
    parser.add_argument("--silence-ms", type=int, default=500,
                        help="server VAD: silence that ends a user turn, in ms (default 500)")
    parser.add_argument("--report", type=Path, metavar="REPORT.html",
                        help="write a self-contained HTML report: timeline plot, cuts, latencies, metrics")
    parser.add_argument("--summary", type=Path, metavar="SUMMARY.json",
                        help="write the report's figures as JSON (barge-ins, per-turn latencies, p50/p95, checks)")
    parser.add_argument("--echo", metavar="DELAY_MS,GAIN_DB",
                        help="open speakers: mix what the listener heard back into the input through a room "
                             "(delay plus a decaying tail), e.g. 60,-6")
    parser.add_argument("--aec", nargs="?", const="webrtc", choices=["webrtc", "speex"], default=None,
                        help="cancel the echo on the input (default webrtc, needs voxline[aec])")
    parser.add_argument("--local-vad", nargs="?", const="webrtc", choices=["webrtc", "silero"], default=None,
                        help="hold the assistant on local speech until the server confirms it")
    parser.add_argument("--grace-ms", type=int, default=1000,
                        help="local VAD: how long to wait for the server to confirm before a false barge-in")
    parser.add_argument("--no-resume", action="store_true",
                        help="local VAD: after a false barge-in cut the reply instead of resuming it")


def transcripts_for(recording: Path) -> tuple[str, ...] | None:
    """The sidecar transcript of a recording (``talk.wav`` → ``talk.txt``): one user turn per line."""
    sidecar = recording.with_suffix(".txt")
    return read_transcripts(sidecar) if sidecar.is_file() else None


def settings_for(args: argparse.Namespace, url: str = "", token: str = "local") -> SessionSettings:
    """The session the replay runs: server VAD with the flags' values (validated by the settings).

    With a sidecar transcript the session asks for input transcription: the built-in server
    answers with the sidecar's lines, a real service with what it recognises.
    """
    try:
        return SessionSettings(url=url or "ws://local", api_key=token, model=args.model, turn_detection="server_vad",
                               transport=args.transport, vad_threshold=args.vad_threshold, silence_ms=args.silence_ms,
                               transcribe=transcripts_for(args.input) is not None)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "--" + str(first["loc"][0]).replace("_", "-")
        raise ConfigurationError(f"{field}: {first['msg']}") from None


def speaker_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--echo``, ``--aec``, ``--local-vad`` and its policy as :func:`run_replay` options (one-line errors)."""
    options: dict[str, Any] = {}
    if args.echo:
        try:
            delay, gain = parse_echo(args.echo)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        options["echo"] = RoomEcho(delay, gain)
    if args.aec:
        options["aec"] = make_canceller(args.aec)  # AecUnavailable: one line, before anything starts
    if args.local_vad:
        options["local_vad"] = LocalVad(args.local_vad)
        try:
            options["barge_policy"] = BargePolicy(grace_s=args.grace_ms / 1000, resume=not args.no_resume)
        except ValueError as exc:
            raise ConfigurationError(f"--grace-ms: {exc}") from None
    return options


def load_tools(spec: str) -> ToolRegistry:
    """``MODULE:ATTR`` → the :class:`ToolRegistry` it names (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"--tools takes MODULE:ATTR (e.g. mytools:registry), not {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"--tools: cannot import {module_name!r}: {exc}") from None
    registry = getattr(module, attr, None)
    if not isinstance(registry, ToolRegistry):
        raise ConfigurationError(f"--tools: {spec} is not a ToolRegistry (got {type(registry).__name__})")
    return registry


def load_input(path: Path) -> np.ndarray:
    """The recording as int16 mono at 24 kHz (other rates are resampled, channels averaged)."""
    samples, rate = read_wav(path)
    if rate != RATE:
        print(f"voxline: resampling {path} from {rate} Hz to {RATE} Hz", file=sys.stderr)
        samples = StreamResampler(rate, RATE).process(samples, last=True)
    if len(samples) == 0:
        raise ConfigurationError(f"{path} holds no audio")
    return samples


def loop_factory(args: argparse.Namespace) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``--fast`` runs on the lockstep loop, whose idle moments move a virtual clock."""
    return (lambda: LockstepLoop(VirtualClock())) if args.fast else None


async def run(args: argparse.Namespace) -> int:
    if args.fast and args.url:
        raise ConfigurationError("--fast runs against the built-in server only; drop --url or --fast")
    if args.fast and args.transport == "webrtc":
        raise ConfigurationError("--fast runs in lockstep without media tracks; it cannot use --transport webrtc")
    for path in (args.out, args.events, getattr(args, "report", None), getattr(args, "summary", None)):
        if path is not None and not path.parent.is_dir():
            raise ConfigurationError(f"cannot write {path}: no such directory {path.parent}")
    speaker_options(args)  # flag errors before anything starts
    for path in (getattr(args, "report", None), getattr(args, "summary", None)):
        if path is not None and path.is_dir():
            raise ConfigurationError(f"cannot write {path}: it is a directory")
    samples = load_input(args.input)
    tools = load_tools(args.tools) if args.tools else None
    settings_for(args)  # flag errors before anything starts
    if args.fast:
        loop = asyncio.get_running_loop()
        if not isinstance(loop, LockstepLoop):
            raise ConfigurationError("--fast needs the lockstep event loop (see replay.loop_factory)")
        scenario = load_scenario(args.scenario)
        transcripts = transcripts_for(args.input)
        if transcripts is not None:
            scenario = with_transcripts(scenario, transcripts)
        return await _run_fast(args, samples, scenario, tools, loop.clock)
    clock = RealClock()
    start = clock.now()
    with contextlib.closing(EventLog(args.events, lambda: clock.now() - start)) as log, \
            contextlib.closing(WavSink(args.out, RATE)) as sink:
        result = await _realtime(args, samples, log, clock, sink, tools)
    _print_summary(args, result)
    _write_report(args, samples, result)
    return 0


async def _run_fast(args: argparse.Namespace, samples: np.ndarray, scenario: Any, tools: ToolRegistry | None,
                    clock: VirtualClock) -> int:
    with contextlib.closing(EventLog(args.events, clock.now)) as log, contextlib.closing(WavSink(args.out, RATE)) as sink:
        connector = engine_connector(scenario, clock, voice=args.voice, on_wire=log.wire)
        result = await run_replay(samples, connector=connector, clock=clock, settings=settings_for(args), sink=sink,
                                  tools=tools, on_event=_logger(log), **speaker_options(args))
    _print_summary(args, result)
    _write_report(args, samples, result)
    return 0


def _logger(log: EventLog) -> Any:
    return lambda event: log.local(event, getattr(event, "at", None))


async def _realtime(args: argparse.Namespace, samples: np.ndarray, log: EventLog, clock: Clock, sink: WavSink,
                    tools: ToolRegistry | None) -> ReplayResult:
    if args.url:
        token = os.environ.get("OPENAI_API_KEY")
        if not token:
            raise ConfigurationError("OPENAI_API_KEY is not set (needed with --url)")
        return await _replay_over(args, args.url, token, samples, log, clock, sink, tools)
    config = ServerConfig(port=0, scenario=args.scenario, voice=args.voice, transcripts=transcripts_for(args.input))
    async with serve(config) as server:
        print(f"voxline: using the built-in local server at {server.url} (scripted replies, energy VAD; "
              "it does not understand speech: input transcripts are scripted)", file=sys.stderr)
        return await _replay_over(args, server.url, "local", samples, log, clock, sink, tools)


async def _replay_over(args: argparse.Namespace, url: str, token: str, samples: np.ndarray, log: EventLog,
                       clock: Clock, sink: WavSink, tools: ToolRegistry | None) -> ReplayResult:
    return await run_replay(samples, connector=None, clock=clock, settings=settings_for(args, url, token), sink=sink,
                            tools=tools, on_wire=log.wire, on_event=_logger(log), **speaker_options(args))


def _mode(args: argparse.Namespace) -> str:
    return "lockstep, virtual clock" if args.fast else f"real time over {args.transport}, {args.url or 'built-in server'}"


def _write_report(args: argparse.Namespace, samples: np.ndarray, result: ReplayResult) -> None:
    """``--report`` / ``--summary``: the session's figures, with the input and HEARD.wav as written."""
    html, summary = getattr(args, "report", None), getattr(args, "summary", None)
    if (html is None and summary is None) or result.metrics is None:
        return
    heard, _rate = read_wav(args.out)
    fatal = [e.message for e in result.events if isinstance(e, SessionError) and e.fatal]
    run = make_run(result.metrics, samples, heard, input_name=str(args.input), mode=_mode(args),
                   duration_s=result.duration_s, fatal_errors=fatal)
    write_report(run, html=html, summary=summary)
    verdict = "pass" if run.summary["pass"] else "FAIL"
    print(f"wrote {', '.join(str(p) for p in (html, summary) if p is not None)} (checks: {verdict})")


def _print_summary(args: argparse.Namespace, result: ReplayResult) -> None:
    mode = "lockstep, virtual clock" if args.fast else f"real time over {args.transport}, {args.url or 'built-in server'}"
    print(f"replayed {args.input} ({mode})")
    for line in result.summary_lines():
        print("  " + line)
    print(f"  underruns: {result.underrun_events} ({result.underrun_samples / RATE * 1000:.0f} ms)")
    print(f"wrote {args.out} ({result.duration_s:.2f} s) and {args.events}")
