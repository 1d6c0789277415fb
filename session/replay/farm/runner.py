"""Running a farm: many replays at once on one event loop, and that loop in many processes.

* :func:`run_farm` — up to ``jobs`` replays at a time on the running loop: in lockstep,
  each on a :class:`~voxline.base.clock.VirtualClock` of its own that the loop moves with the
  others (``fast``; its cut points are those of a replay alone, and a blocking tool holds up
  its own recording only) or in real time, each
  against its own built-in server on loopback or all against ``url``;
* :func:`run_part` — the same in a fresh loop of its own, from synchronous code: the body
  of a worker process (:mod:`.processes`) and of a Ray task (:mod:`.ray_backend`).
  Recordings and outcomes cross as plain dicts.

Each recording writes ``OUT_DIR/NAME/heard.wav`` (streamed as it is produced:
:class:`~voxline.audio.sinks.WavSink` holds back at most two seconds) and
``OUT_DIR/NAME/events.jsonl``, with ``summary.json`` and ``report.html`` when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from voxline.audio.recording import WavFeed
from voxline.audio.sinks import WavSink
from voxline.base.clock import Clock, RealClock, VirtualClock
from voxline.base.errors import VoxlineError
from voxline.base.redaction import redact_url, register_environment_secrets, register_url_secrets
from voxline.base.shown import clip
from voxline.base.files import drop_stale
from voxline.base.loop_runner import bounded_runner
from voxline.base.stop_signals import heeded
from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.server.engine.scenario import load_scenario, with_transcripts
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.net.app import serve
from voxline.realtime.server.net.config import ServerConfig

from ...eventlog import EventLog, flushing
from ...events import SessionError
from ...lockstep import LockstepLoop
from ...report import make_run, write_report
from ...settings import SessionSettings
from ..driver import engine_connector, run_replay
from ..inputs import load_tools, open_input
from ..outputs import ReplayOutputs
from ..result import ReplayResult
from voxline.audio.stereo import write_stereo

from .layout import RECORDING_OUTPUTS, folder_of
from .manifest import FarmRecording
from .results import Check, Outcome, judge, measure, outcome

__all__ = ["FarmOptions", "OutcomeHook", "complete", "interrupted_outcome", "order", "replay_recording", "run_farm",
           "run_part"]

OutcomeHook = Callable[[Outcome], None]


@dataclass(frozen=True)
class FarmOptions:
    """How every replay of a farm runs (plain data: it is pickled to workers and Ray tasks)."""

    out_dir: Path
    settings: SessionSettings  # url and key are filled in per recording for the built-in server
    fast: bool = True
    jobs: int = 8
    url: str | None = field(default=None, repr=False)  # None: the built-in server; a key in it is never shown
    voice: str = "auto"
    report: bool = False  # summary.json and report.html per recording
    stereo: bool = False  # stereo.wav per recording: the input and what was heard, side by side
    tail_s: float = 120.0

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"FarmOptions({shown}, url={None if self.url is None else redact_url(self.url)!r})"


class _Voices:
    """Each scenario's fixed replies voiced once per process, shared by its replays."""

    def __init__(self, voice: str) -> None:
        self.synth, self.voice = make_synth(voice)
        self._cache: dict[str | None, VoiceCache] = {}

    def get(self, source: str | None, scenario: Any) -> VoiceCache:
        if source not in self._cache:
            self._cache[source] = warm_up(scenario, self.synth)
        return self._cache[source]


async def run_farm(recordings: list[FarmRecording], options: FarmOptions, stop: asyncio.Event | None = None,
                   on_outcome: OutcomeHook | None = None,
                   on_start: Callable[[FarmRecording], None] | None = None) -> list[Outcome]:
    """Replay ``recordings`` with up to ``options.jobs`` at once; outcomes in the recordings' order.

    Each outcome is also handed to ``on_outcome`` as its recording finishes, and each recording to
    ``on_start`` as its replay begins. Once ``stop`` is set
    (a signal), running replays end where they are and the rest do not start: all of them are
    ``error`` outcomes saying so, and what ran is on disk."""
    register_url_secrets(options.url)  # in a worker process too: its errors and logs redact them
    lockstep: LockstepLoop | None = None
    if options.fast:
        loop = asyncio.get_running_loop()
        if not isinstance(loop, LockstepLoop):
            raise VoxlineError("a fast farm needs the lockstep event loop (see run_part)")
        lockstep = loop
    voices = _Voices(options.voice) if options.fast else None
    gate = asyncio.Semaphore(max(1, options.jobs))

    async def replayed(recording: FarmRecording) -> Outcome:
        if on_start is not None:
            on_start(recording)
        if lockstep is None:
            return await replay_recording(recording, options, RealClock(), voices, stop)
        # a virtual clock of its own: a tool stuck in one recording holds up that recording only
        with lockstep.own_clock() as clock:
            return await replay_recording(recording, options, clock, voices, stop)

    async def one(recording: FarmRecording) -> Outcome:
        async with gate:
            if stop is not None and stop.is_set():
                done = interrupted_outcome(recording, "interrupted before it started", options.out_dir)
            else:
                done = await replayed(recording)
        if on_outcome is not None:
            on_outcome(done)
        return done

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(r)) for r in recordings]
    return [t.result() for t in tasks]


async def replay_recording(recording: FarmRecording, options: FarmOptions, clock: Clock,
                           voices: _Voices | None = None, stop: asyncio.Event | None = None) -> Outcome:
    """One replay of the farm, judged; a failure to run becomes an ``error`` outcome, never an exception."""
    folder = options.out_dir / folder_of(recording)
    heard, events = folder / "heard.wav", folder / "events.jsonl"
    started = time.perf_counter()
    written = {"heard.wav", "events.jsonl"}  # this run's (or, where nothing ran, the last run's, put back)
    try:
        made = not folder.exists()  # a path too long for the file system raises here: this recording's error
        folder.mkdir(parents=True, exist_ok=True)
        try:
            if recording.problem is not None:  # found as the farm was gathered: an error of this recording's alone
                raise ConfigurationError(recording.problem)
            with open_input(recording.path, quiet=True) as feed:  # streamed as it plays
                result = await _replay(recording, options, clock, voices, feed, heard, events, stop)
        except BaseException:
            if made:  # nothing ran (the last run's files, if any, are back): no empty folder stays either
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        measured = measure(result)
        if options.report and result.metrics is not None and not result.interrupted:  # not judged on a part
            _write_report(recording, result, heard, folder, options, judge(recording.expect, measured))
            written |= {"summary.json", "report.html"}
        if options.stereo:
            with open_input(recording.path, quiet=True) as feed:  # streamed, a second at a time
                write_stereo(folder / "stereo.wav", feed, heard, captured=result.captured_samples)
            written.add("stereo.wav")
        _drop_stale(folder, written)
    except (VoxlineError, OSError) as exc:
        with contextlib.suppress(OSError):  # the error is the verdict, whatever else fails
            _drop_stale(folder, written)
        return Outcome(recording.name, str(recording.path), "error", error=_one_line(exc),
                       wall_s=time.perf_counter() - started)
    except Exception as exc:  # one broken recording must not take the farm's other sessions down
        with contextlib.suppress(OSError):
            _drop_stale(folder, written)
        return Outcome(recording.name, str(recording.path), "error", error=f"{type(exc).__name__}: {_one_line(exc)}",
                       wall_s=time.perf_counter() - started)
    also = {key: str(folder / name) for key, name in (("summary", "summary.json"), ("report", "report.html"),
                                                       ("stereo", "stereo.wav")) if name in written}
    done = outcome(recording.name, str(recording.path), recording.expect, measured, heard=str(heard),
                   events=str(events), **also)
    done.wall_s = time.perf_counter() - started
    if result.interrupted:
        done.status = "error"
        done.error = (f"interrupted after {result.duration_s:.1f} s of listener time (what ran is in "
                      f"{folder.name}/heard.wav and events.jsonl)")
    return done


def _drop_stale(folder: Path, written: set[str]) -> None:
    """A last run's summary, report or stereo file this run did not write: beside this run's audio, or its error,
    it would pass for this run's (a CI job collecting ``*/summary.json`` would read a pass)."""
    for name in RECORDING_OUTPUTS:
        if name not in written:
            drop_stale(folder / name)


def interrupted_outcome(recording: FarmRecording, why: str, out_dir: Path) -> Outcome:
    """The ``error`` verdict of a recording that a stop signal (or its worker's end) kept from finishing; a last
    run's summary, report and stereo file in its folder go (:func:`_drop_stale`)."""
    with contextlib.suppress(OSError):
        _drop_stale(out_dir / folder_of(recording), {"heard.wav", "events.jsonl"})
    return Outcome(recording.name, str(recording.path), "error", error=why)


def complete(recordings: list[FarmRecording], outcomes: list[Outcome], why: str, out_dir: Path) -> list[Outcome]:
    """``outcomes`` plus an ``error`` one (``why``) for every recording that has none, in the recordings' order."""
    have = {o.name for o in outcomes}
    return order(recordings, [*outcomes, *(interrupted_outcome(r, why, out_dir) for r in recordings
                                           if r.name not in have)])


async def _replay(recording: FarmRecording, options: FarmOptions, clock: Clock, voices: _Voices | None,
                  samples: Any, heard: Path, events: Path, stop: asyncio.Event | None) -> ReplayResult:
    tools = load_tools(recording.tools, f"{recording.name}: tools") if recording.tools else None
    scenario = load_scenario(recording.scenario)
    if recording.transcripts is not None:
        scenario = with_transcripts(scenario, recording.transcripts)
    settings = options.settings.model_copy(update={"transcribe": recording.transcripts is not None})
    origin = clock.now()
    documents = [heard.parent / name for name in RECORDING_OUTPUTS if name not in ("heard.wav", "events.jsonl")]
    with ReplayOutputs([heard, events], documents).run() as outputs:  # the last run's summary goes once it began
        with contextlib.closing(EventLog(events, lambda: clock.now() - origin)) as log, \
                contextlib.closing(WavSink(heard)) as sink:
            def on_event(event: Any) -> None:
                log.local(event, getattr(event, "at", None))

            async with flushing(log, clock):
                on_wire = outputs.wire(log.wire)
                common: dict[str, Any] = {"clock": clock, "sink": sink, "tools": tools, "on_event": on_event,
                                          "tail_s": options.tail_s, "stop": stop}
                if voices is not None:
                    connector = engine_connector(scenario, clock, voice=voices.voice, on_wire=on_wire,
                                                 voices=voices.get(recording.scenario, scenario), api=settings.api)
                    result = await run_replay(samples, connector=connector, settings=settings, **common)
                elif options.url is not None:
                    result = await run_replay(samples, connector=None, settings=settings, on_wire=on_wire, **common)
                else:
                    config = ServerConfig(port=0, scenario=recording.scenario, voice=options.voice,
                                          transcripts=recording.transcripts)
                    async with serve(config) as server:
                        local = settings.model_copy(update={"url": server.url})
                        result = await run_replay(samples, connector=None, settings=local, on_wire=on_wire, **common)
        if outputs.stopped_unanswered(result):  # the last run's files are back: this one is no result
            raise ConnectionFailed("interrupted before the server answered: nothing was replayed")
        outputs.ended(result)
    return result


def _write_report(recording: FarmRecording, result: ReplayResult, heard: Path, folder: Path,
                  options: FarmOptions, judged: list[Check]) -> None:
    """The recording's report.html and summary.json; the manifest's expectations are among their checks, so a
    recording the farm fails is not a pass there."""
    assert result.metrics is not None
    fatal = [e.message for e in result.events if isinstance(e, SessionError) and e.fatal]
    if result.interrupted:
        fatal.append(f"interrupted after {result.duration_s:.2f} s")
    where = redact_url(options.url) if options.url else "built-in server"
    mode = "lockstep, virtual clock" if options.fast else f"real time, {where}"
    with open_input(recording.path, quiet=True) as samples, WavFeed(heard) as heard_feed:  # streamed into the plot
        run = make_run(result.metrics, samples, heard_feed, input_name=str(recording.path), mode=mode,
                       duration_s=result.duration_s, fatal_errors=fatal,
                       expectations=[{"name": f"expected {c.name} {c.expected}", "ok": c.ok,
                                      "detail": f"measured {c.measured}"} for c in judged])
    write_report(run, html=folder / "report.html", summary=folder / "summary.json")


def _one_line(exc: BaseException) -> str:
    return clip(str(exc), 1000, flat=True) or type(exc).__name__


def run_part(recordings: list[dict[str, Any]], options: FarmOptions,
             on_outcome: Callable[[dict[str, Any]], None] | None = None, stoppable: bool = False,
             on_start: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """:func:`run_farm` on a loop of its own (lockstep when fast); plain dicts in and out.

    ``on_outcome`` is shown each verdict as it comes, ``on_start`` the name of each recording as its
    replay begins; with ``stoppable``, SIGTERM, SIGINT and SIGHUP (unless it is ignored) stop the part as they
    stop a farm (the body of a worker process or a Ray task, which Ray stops with SIGINT), and their handlers are
    put back as they were when it ends."""
    register_environment_secrets()  # a worker process's own redaction: the command registered them in its own
    parsed = [FarmRecording.model_validate(r) for r in recordings]
    factory = (lambda: LockstepLoop(VirtualClock())) if options.fast else None

    async def main() -> list[Outcome]:
        stop = asyncio.Event()
        for sig in stops:
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        hook = None if on_outcome is None else (lambda o: on_outcome(o.to_json()))
        starts = None if on_start is None else (lambda r: on_start(r.name))
        return await run_farm(parsed, options, stop, hook, starts)

    # SIGTERM and SIGINT are how the command and Ray stop a part (a worker starts with SIGINT ignored, until now);
    # SIGHUP ignored is the command's, passed on (nohup): the part goes on through a hangup, as the command does
    stops = (signal.SIGTERM, signal.SIGINT, *heeded((signal.SIGHUP,))) if stoppable else ()
    handlers = {sig: signal.getsignal(sig) for sig in stops}
    try:
        with bounded_runner(factory) as runner:  # a tool that ignores its cancel does not keep the worker
            outcomes = runner.run(main())
    finally:  # the loop's close leaves them at their defaults: a Ray worker that runs more tasks keeps its own
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    return [o.to_json() for o in outcomes]


def order(recordings: list[FarmRecording], outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` in the order of ``recordings`` (by name)."""
    rank = {r.name: n for n, r in enumerate(recordings)}
    return sorted(outcomes, key=lambda o: rank.get(o.name, len(rank)))
