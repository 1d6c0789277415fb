"""``voxline replay INPUT.wav``: recorded audio in, heard audio out, every wire event logged.

Without ``--url`` it runs against the built-in local server (in-process, on loopback, or in
lockstep on a virtual clock with ``--fast``). With ``--url`` it talks to that server, using
``OPENAI_API_KEY`` as the token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from voxline.audio.aec import make_canceller
from voxline.audio.local_vad import LocalVad
from voxline.audio.room import RoomEcho, parse_echo
from voxline.audio.recording import SampleFeed, WavFeed
from voxline.audio.sinks import WavSink
from voxline.audio.wavio import WavReader
from voxline.audio.stereo import write_stereo
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock, VirtualClock
from voxline.base.files import each_written, nonempty_path, shown
from voxline.base.errors import AudioError
from voxline.base.log_output import same_place, skip_records_said_as_events
from voxline.base.redaction import redact_url
from voxline.base.shown import printable
from voxline.base.models import DEFAULT_LIVE_MODEL, DEFAULT_REALTIME_MODEL
from voxline.base.urls import LOCAL_KEY, is_loopback_url
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import load_scenario, with_transcripts
from voxline.realtime.server.engine.voices import make_synth
from voxline.realtime.server.net.app import serve
from voxline.realtime.server.net.config import ServerConfig

from ..eventlog import EventLog, flushing
from ..events import SessionError
from ..local_barge import BargePolicy
from ..lockstep import LockstepLoop
from ..replay import ReplayResult, engine_connector, run_replay
from ..replay.inputs import load_tools, open_input, transcripts_for
from ..replay.outputs import ReplayOutputs
from ..replay.result import NOT_OPENED, ReplayLines
from ..report import make_run, write_report
from ..keys import key_for
from ..settings import SessionSettings, UsageError, api_key_from_env, load_settings
from ..tools import ToolFinished, ToolRegistry
from .paths import (check_paths, default_output, document_path, documents_to_stdout, output_path, read_with,
                    writable)
from ..voice import VoiceSession
from . import farm
from .quiet import QuietWhenGone
from .stereo import add_stereo_argument
from .stopping import Stop
from .endpoint import add_local_argument, built_in_only, target_url

__all__ = ["add_arguments", "load_tools", "loop_factory", "run", "target_url"]

RATE = SAMPLE_RATE



def _tools_spec(value: str) -> str:
    """``--tools`` of the wrong shape is the command line's mistake (exit 2); importing it comes later."""
    module, _, attr = value.partition(":")
    if not module or not attr:
        raise argparse.ArgumentTypeError(f"takes MODULE:ATTR (e.g. mytools:registry), not {value!r}")
    return value

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", type=nonempty_path, nargs="*", metavar="INPUT.wav",
                        help="recording to use as the microphone; several, or a directory of *.wav, run a farm")
    parser.add_argument("--out", type=output_path, metavar="HEARD.wav",
                        help="one recording: what the listener heard, a PCM16 mono 24 kHz WAV (a .wav name; "
                             "default INPUT.heard.wav in the current directory); its sample n is what was heard "
                             "n/24000 s into the input (input sample n for a 24 kHz input; an input at another rate "
                             "is resampled, its sample m lines up with HEARD.wav sample m*24000/rate)")
    parser.add_argument("--events", type=document_path("JSON lines"), metavar="EVENTS.jsonl",
                        help="one recording: wire event log (default INPUT.events.jsonl in the current directory)")
    parser.add_argument("--url", help="Realtime API base URL, e.g. ws://127.0.0.1:8765/v1 for 'voxline serve' (default: "
                        "$VOXLINE_URL, else the built-in local server); OPENAI_API_KEY is the token, a loopback URL "
                        "needs none")
    parser.add_argument("--transport", choices=["ws", "webrtc"], default=None,
                        help="wire transport (default $VOXLINE_TRANSPORT, else ws); over webrtc the server owns the "
                             "output buffer and cuts itself")
    add_local_argument(parser)
    parser.add_argument("--channel", default=None, metavar="left|right|N|mix",
                        help="a recording with several channels: the one to use as the microphone (left, right, or "
                             "its number from 1), or mix for their average (the default, said on stderr)")
    parser.add_argument("--api", choices=["realtime", "live"], default=None,
                        help="the interface: realtime (/v1/realtime) or live (GPT-Live, /v1/live/sessions); "
                             "default $VOXLINE_API, else realtime")
    parser.add_argument("--fast", action="store_true",
                        help="built-in server only: run in lockstep on a virtual clock, faster than real time")
    parser.add_argument("--tools", metavar="MODULE:ATTR", type=_tools_spec,
                        help="a ToolRegistry (e.g. mytools:registry) to run the calls the server makes")
    parser.add_argument("--scenario", default=None, metavar="NAME|FILE",
                        help="built-in server scenario: default, long, tools, listen or a TOML file (default: default)")
    parser.add_argument("--voice", choices=["auto", "espeak", "tone"], default="auto",
                        help="built-in server voice (default auto: espeak-ng if installed, else tone)")
    parser.add_argument("--model", default=None,
                        help=f"model to ask for (default $VOXLINE_MODEL, else {DEFAULT_REALTIME_MODEL}; with --api live, "
                             f"$VOXLINE_LIVE_MODEL, else {DEFAULT_LIVE_MODEL})")
    parser.add_argument("--vad-threshold", type=float, default=None, metavar="0..1",
                        help="server VAD threshold, 0 to 1 (default 0.5)")
    parser.add_argument("--silence-ms", type=int, default=None, metavar="MS",
                        help="server VAD: silence that ends a user turn, in ms, 0 to 60000 (default 500)")
    parser.add_argument("--report", type=document_path("an HTML page"), metavar="REPORT.html",
                        help="write a self-contained HTML report: timeline plot, cuts, latencies, metrics (- for stdout)")
    parser.add_argument("--summary", type=document_path("JSON"), metavar="SUMMARY.json",
                        help="write the report's figures as JSON (barge-ins, per-turn latencies, p50/p95, checks; - for stdout)")
    parser.add_argument("--echo", metavar="DELAY_MS,GAIN_DB",
                        help="open speakers: mix what the listener heard back into the input through a room "
                             "(delay plus a decaying tail), e.g. 60,-6")
    parser.add_argument("--aec", nargs="?", const="webrtc", choices=["webrtc", "speex"], default=None,
                        help="cancel the echo on the input (default webrtc, needs voxline[aec]); it stands aside "
                             "while the input does not hear what was played")
    parser.add_argument("--local-vad", nargs="?", const="webrtc", choices=["webrtc", "silero"], default=None,
                        help="hold the assistant on local speech until the server confirms it")
    parser.add_argument("--grace-ms", type=int, default=None,
                        help="with --local-vad: how long to wait for the server to confirm before a false barge-in "
                             "(default 1000)")
    parser.add_argument("--no-resume", action="store_true",
                        help="with --local-vad: after a false barge-in cut the reply instead of resuming it")
    add_stereo_argument(parser)
    farm.add_arguments(parser)


def settings_for(args: argparse.Namespace, url: str = "", token: str = LOCAL_KEY) -> SessionSettings:
    """The session the replay runs: server VAD with the flags' values, else the ``VOXLINE_*``
    variables (each validated, one line naming the flag or variable).

    With a sidecar transcript the session asks for input transcription: the built-in server
    answers with the sidecar's lines, a real service with what it recognises.
    """
    settings = load_settings(SessionSettings, model=args.model, transport=args.transport, api=args.api,
                             vad_threshold=args.vad_threshold, silence_ms=args.silence_ms)
    return settings.model_copy(update={"url": url or "ws://local", "api_key": SecretStr(token),
                                       "turn_detection": "server_vad",
                                       "transcribe": transcripts_for(args.inputs[0]) is not None})


def token_for(url: str) -> str:
    """The API key from the environment (an empty or blank variable is unset), else the key in the URL's
    userinfo (``user:KEY@host``); a loopback server (``voxline serve``) takes any token."""
    key = key_for(url, api_key_from_env())
    if key is not None:
        return key
    raise ConfigurationError(f"OPENAI_API_KEY is not set (needed for {redact_url(url)}; a loopback --url needs none)")


def speaker_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--echo``, ``--aec``, ``--local-vad`` and its policy as :func:`run_replay` options (one-line errors)."""
    options: dict[str, Any] = {}
    if args.echo:
        try:
            delay, gain = parse_echo(args.echo)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        options["echo"] = RoomEcho(delay, gain)
    if args.aec:
        options["aec"] = make_canceller(args.aec)  # AecUnavailable: one line, before anything starts
    if args.grace_ms is not None and args.grace_ms < 0:
        raise UsageError(f"--grace-ms takes milliseconds >= 0, not {args.grace_ms}")
    policy = [flag for flag, given in (("--grace-ms", args.grace_ms is not None), ("--no-resume", args.no_resume))
              if given]
    if policy and not args.local_vad:  # else it would be taken and do nothing
        raise UsageError(f"{' and '.join(policy)} set{'s' if len(policy) == 1 else ''} how the local VAD holds the "
                         f"assistant; add --local-vad, or drop {'it' if len(policy) == 1 else 'them'}")
    if args.local_vad:
        options["local_vad"] = LocalVad(args.local_vad)
        grace = {"grace_s": args.grace_ms / 1000} if args.grace_ms is not None else {}
        try:
            options["barge_policy"] = BargePolicy(resume=not args.no_resume, **grace)
        except ValueError as exc:
            raise UsageError(f"--grace-ms: {exc}") from None
    return options


def loop_factory(args: argparse.Namespace) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``--fast`` runs on the lockstep loop, whose idle moments move a virtual clock (a farm whose
    sessions run in worker processes or Ray tasks waits for them on a plain loop)."""
    if farm.is_farm(args) and not farm.in_this_loop(args):
        return None
    return (lambda: LockstepLoop(VirtualClock())) if args.fast else None


SERVER_NOTE = "scripted replies, energy VAD; it does not understand speech: input transcripts are scripted"


async def run(args: argparse.Namespace) -> int:
    # the lines for people go to stderr, or nowhere if it was closed: never into the document
    elsewhere = sys.stderr if sys.stderr is not None else io.StringIO()
    if not farm.is_farm(args) and sys.stderr is not None and (
            documents_to_stdout(args) or (sys.stdout is not None and same_place(sys.stdout, sys.stderr))):
        skip_records_said_as_events()  # one recording's transcript says it where the log line would say it again
    if documents_to_stdout(args):
        with contextlib.redirect_stdout(elsewhere):
            return await _command(args)
    if sys.stdout is None:
        return await _command(args)
    # stdout's reader gone (`| head -1`): the run goes on and writes its files, then ends as a command whose
    # reader went away does (quietly, status 1); before, the next line ended it, a farm's with a traceback
    quiet = QuietWhenGone(sys.stdout)
    with contextlib.redirect_stdout(quiet):
        code = await _command(args)
    if quiet.gone:
        raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")
    return code


async def _command(args: argparse.Namespace) -> int:
    # before the farm's flags are looked at: a CI job whose file list expanded to nothing ran a farm of no
    # recordings, wrote an empty results file and went green
    if not args.inputs and args.manifest is None:
        raise UsageError("give a recording (INPUT.wav), several, a directory or --manifest FILE")
    if farm.is_farm(args):
        return await farm.run(args)
    farm.refuse_farm_flags(args)
    args.input = args.inputs[0]  # one recording from here on
    args.out = args.out or default_output(args.input, ".heard.wav")
    args.events = args.events or default_output(args.input, ".events.jsonl")
    url = target_url(args)
    if url:
        built_in_only(args)
    transport = settings_for(args).transport  # flag and variable errors before anything starts
    if args.fast and transport == "webrtc":
        raise UsageError("--fast runs in lockstep without media tracks; it cannot use --transport webrtc")
    reports = [p for p in (getattr(args, "report", None), getattr(args, "summary", None),
                           getattr(args, "stereo_out", None)) if p is not None]
    check_paths([args.input, *read_with(args.input, args.scenario, args.tools)], [args.out, args.events, *reports])
    for flag, path in (("--out", args.out), ("--stereo-out", getattr(args, "stereo_out", None))):
        if path is not None and path.suffix and path.suffix.lower() not in (".wav", ".wave"):
            raise UsageError(f"{flag} writes a WAV file (16-bit PCM); name it .wav, not {path.name}")
    for path in (args.out, args.events, *reports):
        if not path.parent.is_dir():
            raise ConfigurationError(f"cannot write {path}: no such directory {path.parent}")
        if path.is_dir():
            raise ConfigurationError(f"cannot write {path}: it is a directory")
        writable(path)  # before any output is opened: a run never ends on an output it could not write
    if reports and args.out.exists() and not args.out.is_file():  # e.g. /dev/null: nothing to read back after the run
        raise ConfigurationError(f"--report, --summary and --stereo-out read --out back, and {args.out} is not a "
                                 "regular file")
    speaker_options(args)  # flag errors before anything starts
    with open_input(args.input, channel=args.channel) as feed:  # streamed: memory flat in the recording's length
        return await _run(args, url, feed)


async def _run(args: argparse.Namespace, url: str | None, samples: SampleFeed) -> int:
    tools = load_tools(args.tools) if args.tools else None
    token = token_for(url) if url else LOCAL_KEY
    scenario = load_scenario(args.scenario)  # a name no scenario has exits 2, a file that is no scenario 1, as serve
    transcripts = transcripts_for(args.input)
    if transcripts is not None:
        scenario = with_transcripts(scenario, transcripts)
    with Stop() as stop:
        live: LiveLines | None = None
        documents = [p for p in (getattr(args, name, None) for name in ("summary", "report", "stereo_out"))
                     if p is not None]
        # the last run's files, kept if it never began; once it began, its documents go (beside this run's
        # audio they would pass for its own: a CI job reading the summary would read a pass)
        with ReplayOutputs([args.out, args.events], documents).run() as outputs:
            if args.fast:
                loop = asyncio.get_running_loop()
                if not isinstance(loop, LockstepLoop):
                    raise ConfigurationError("--fast needs the lockstep event loop (see replay.loop_factory)")
                result = await _run_fast(args, samples, scenario, tools, loop.clock, stop, outputs)
            else:
                clock = RealClock()
                start = clock.now()
                live = LiveLines(samples.frames / RATE, clock, start, args.verbose)
                with contextlib.closing(EventLog(args.events, lambda: clock.now() - start)) as log, \
                        contextlib.closing(WavSink(args.out, RATE)) as sink:
                    async with flushing(log, clock):
                        result = await _realtime(args, url, token, samples, log, clock, sink, tools, live, stop,
                                                 outputs.wire(log.wire))
            if outputs.stopped_unanswered(result):
                print(f"voxline: {stop.name or 'stopped'} before the server answered: nothing was replayed; "
                      f"{printable(str(args.out))} and {printable(str(args.events))} are as they were",
                      file=sys.stderr)
                return stop.exit_code
            outputs.ended(result)
        if live is not None:
            live.done()
        failure = _failure(result, args.events)
        _print_summary(args, result, failure)
        each_written(lambda: _write_report(args, result, stop), lambda: _write_stereo(args, result))
    if failure is not None and not stop.exit_code:
        print(f"voxline replay: error: {printable(failure)}", file=sys.stderr)
        return 1
    return stop.exit_code


def _failure(result: ReplayResult, events: Path) -> str | None:
    """Why a replay that ran did not run as a session to its end (a fatal error), or None; a server that never
    opened a session is named so first (its refusal is what every later error follows from), and nothing was
    heard then: what it said is the run's record."""
    fatal = [e for e in result.events if isinstance(e, SessionError) and e.fatal]
    refused = next((e for e in fatal if e.code == NOT_OPENED), None)
    if refused is not None:
        return f"{refused.message}; what it said is in {events}"
    if not fatal:
        return None
    return f"the session ended with a fatal error: {fatal[0].message.rstrip('.')}; what was heard until then is written"


async def _run_fast(args: argparse.Namespace, samples: SampleFeed, scenario: Any, tools: ToolRegistry | None,
                    clock: VirtualClock, stop: Stop, outputs: ReplayOutputs) -> ReplayResult:
    _synth, voice = make_synth(args.voice)
    print(f"voxline: the built-in local server's engine in process, on a virtual clock (scenario '{scenario.name}', "
          f"voice '{voice}'; {SERVER_NOTE})", file=sys.stderr)
    api = settings_for(args).api
    print(f"replaying {shown(args.input)} (lockstep, virtual clock{', GPT-Live' if api == 'live' else ''})", flush=True)
    live = LiveLines(samples.frames / RATE, clock, clock.now(), args.verbose, progress=False)
    with contextlib.closing(EventLog(args.events, clock.now)) as log, contextlib.closing(WavSink(args.out, RATE)) as sink:
        connector = engine_connector(scenario, clock, voice=voice, on_wire=outputs.wire(log.wire), api=api)
        return await run_replay(samples, connector=connector, clock=clock, settings=settings_for(args), sink=sink,
                                tools=tools, on_event=_logger(log, live), on_session=live.attach, stop=stop.event,
                                **speaker_options(args))


def _logger(log: EventLog, also: Callable[[Any], None] | None = None) -> Any:
    def on_event(event: Any) -> None:
        log.local(event, getattr(event, "at", None))
        if also is not None:
            also(event)

    return on_event


class LiveLines:
    """Each user turn, reply and barge-in printed as it happens, and on a terminal a progress line
    (real time only: ``progress=False`` for a lockstep replay)."""

    def __init__(self, total_s: float, clock: Clock, start: float, verbose: int = 0, progress: bool = True) -> None:
        self.total_s, self.clock, self.start = total_s, clock, start
        self.tty = progress and sys.stderr.isatty()
        self._at = 0.0
        self._shown = -1
        self._session: VoiceSession | None = None
        self.lines = ReplayLines(lambda: self._session.metrics() if self._session is not None else None, verbose)

    def attach(self, session: VoiceSession) -> None:
        """The session whose figures the lines read (its metrics, as events come)."""
        self._session = session

    def __call__(self, event: Any) -> None:
        at = getattr(event, "at", None)
        if at is None:  # a transcript: stamped with the listener time it was taken at
            at = self._session.output.now() if self._session is not None else self._at
        self._at = at
        line = self.lines.line(event, at)
        if line is not None:
            self._clear()
            print("  " + line, flush=True)
        self.progress()

    def wire(self, observer: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """``observer`` that also moves the progress line (frames flow every 20 ms, events may not)."""
        def observe(direction: str, text: str) -> None:
            observer(direction, text)
            self.progress()

        return observe

    def progress(self) -> None:
        second = int(self.clock.now() - self.start)
        if self.tty and second != self._shown:
            self._shown = second
            print(f"\r  … {min(second, self.total_s):.0f} of {self.total_s:.0f} s of input", end="", file=sys.stderr,
                  flush=True)

    def _clear(self) -> None:
        if self.tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        self._clear()


async def _realtime(args: argparse.Namespace, url: str | None, token: str, samples: SampleFeed, log: EventLog,
                    clock: Clock, sink: WavSink, tools: ToolRegistry | None, live: LiveLines,
                    stop: Stop, log_wire: Callable[[str, str], None]) -> ReplayResult:
    """The replay against ``url`` or a built-in server; ``log_wire`` is shown every frame on the wire."""
    mode = f"real time over {settings_for(args).transport}" + (", GPT-Live" if settings_for(args).api == "live" else "")
    if url:
        print(f"replaying {shown(args.input)} ({mode}, {redact_url(url)})", flush=True)
        return await _replay_over(args, url, token, samples, log, clock, sink, tools, live, stop, log_wire)
    config = ServerConfig(port=0, scenario=args.scenario, voice=args.voice, transcripts=transcripts_for(args.input))
    async with serve(config) as server:
        print(f"voxline: using the built-in local server at {server.url} (scenario '{server.scenario.name}', "
              f"voice '{server.voice}'; {SERVER_NOTE})", file=sys.stderr)
        print(f"replaying {shown(args.input)} ({mode}, built-in server)", flush=True)
        return await _replay_over(args, server.url, LOCAL_KEY, samples, log, clock, sink, tools, live, stop, log_wire)


async def _replay_over(args: argparse.Namespace, url: str, token: str, samples: SampleFeed, log: EventLog,
                       clock: Clock, sink: WavSink, tools: ToolRegistry | None, live: LiveLines,
                       stop: Stop, log_wire: Callable[[str, str], None]) -> ReplayResult:
    return await run_replay(samples, connector=None, clock=clock, settings=settings_for(args, url, token), sink=sink,
                            tools=tools, on_wire=live.wire(log_wire), on_event=_logger(log, live),
                            on_session=live.attach, stop=stop.event, **speaker_options(args))


def _mode(args: argparse.Namespace) -> str:
    url = target_url(args)
    return "lockstep, virtual clock" if args.fast else f"real time, {redact_url(url) if url else 'built-in server'}"


def _write_report(args: argparse.Namespace, result: ReplayResult, stop: Stop) -> None:
    """``--report`` / ``--summary``: the session's figures, with the input and HEARD.wav as written (an
    interrupted replay's too: its figures cover what ran, and the interruption fails its checks)."""
    html, summary = getattr(args, "report", None), getattr(args, "summary", None)
    if (html is None and summary is None) or result.metrics is None:
        return
    fatal = [e.message for e in result.events if isinstance(e, SessionError) and e.fatal]
    if result.interrupted:
        fatal.append(f"interrupted by {stop.name or 'a signal'} after {result.duration_s:.2f} s")
    # both waveforms streamed into the plot: a long call's audio never sits in memory whole
    with open_input(args.input, quiet=True, channel=args.channel) as samples, WavFeed(args.out) as heard:
        run = make_run(result.metrics, samples, heard, input_name=str(args.input), mode=_mode(args),
                       duration_s=result.duration_s, fatal_errors=fatal)
    write_report(run, html=html, summary=summary)
    verdict = "pass" if run.summary["pass"] else "FAIL"
    print(f"wrote {', '.join(shown(p) for p in (html, summary) if p is not None)} (checks: {verdict})")


def _print_summary(args: argparse.Namespace, result: ReplayResult, failure: str | None) -> None:
    """After the lines printed as the replay went: underruns, and what was written."""
    # stopped early, or failed, it may not have reached any speech: the recording is not to blame then
    if not result.heard_speech and not result.interrupted and failure is None:
        if settings_for(args).api == "live":  # Live tells of the user's words only in its input transcript
            why = "the server sent no input transcript"
            sidecar = Path(args.input).with_suffix(".txt").name
            if not (url := target_url(args)):
                why += f" (the built-in server transcribes only the turns {sidecar} scripts)"
            elif is_loopback_url(url):  # most likely `voxline serve`, which transcribes nothing unscripted
                why += f" (if it is `voxline serve`, start it with --transcripts {sidecar})"
            # its turns may well have been heard and answered: only the words are missing
            print(f"voxline: no words of yours to show from {shown(args.input)}: {printable(why)}", file=sys.stderr)
        else:
            why = "the server's voice activity detection never fired (is it silent, or very quiet?)"
            print(f"voxline: no speech detected in {shown(args.input)}: {why}", file=sys.stderr)
    if args.tools is None and any(isinstance(e, ToolFinished) for e in result.events):
        print("voxline: the server called tools and nothing ran them (each was answered 'unknown tool'): give a "
              "ToolRegistry with --tools MODULE:ATTR", file=sys.stderr)
    print(f"  underruns: {result.underrun_events} ({result.underrun_samples / RATE * 1000:.0f} ms)")
    cut = " (interrupted: what was heard until then)" if result.interrupted else ""
    print(f"wrote {shown(args.out)} ({_written_s(args.out, result.duration_s):.2f} s){cut} and {shown(args.events)}", flush=True)


def _written_s(path: Path, otherwise: float) -> float:
    """The length of the heard WAV as written (its last block is whole, the listener may have been
    inside it when the replay ended); ``otherwise`` where it is no file to read back (``/dev/null``)."""
    if not path.is_file():
        return otherwise
    try:
        with WavReader(path) as wav:
            return wav.duration
    except AudioError:
        return otherwise


def _write_stereo(args: argparse.Namespace, result: ReplayResult) -> None:
    """``--stereo-out``: the input as the session captured it and HEARD.wav side by side, sample-aligned
    (:mod:`.stereo`); an interrupted replay's ends where it stopped."""
    if getattr(args, "stereo_out", None) is not None:
        with open_input(args.input, quiet=True, channel=args.channel) as feed:  # streamed, a second at a time
            write_stereo(args.stereo_out, feed, args.out, captured=result.captured_samples)
        print(f"wrote {shown(args.stereo_out)} (left: the input, right: what the listener heard)", flush=True)
