"""Running a farm: many replays at once on one event loop, and that loop in many processes.

* :func:`run_farm` — up to ``jobs`` replays at a time on the running loop: in lockstep on
  one shared :class:`~voxline.base.clock.VirtualClock` (``fast``; every session keeps its
  own origin, so its cut points are those of a replay alone) or in real time, each
  against its own built-in server on loopback or all against ``url``;
* :func:`run_part` — the same in a fresh loop of its own, from synchronous code: the body
  of a worker process (:func:`run_processes`) and of a Ray task (:mod:`.ray_backend`).
  Recordings and outcomes cross as plain dicts.

Each recording writes ``OUT_DIR/NAME/heard.wav`` (streamed as it is produced:
:class:`~voxline.audio.sinks.WavSink` keeps two seconds in memory) and
``OUT_DIR/NAME/events.jsonl``, with ``summary.json`` and ``report.html`` when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxline.audio.sinks import WavSink
from voxline.audio.wavio import read_wav
from voxline.base.clock import Clock, RealClock, VirtualClock
from voxline.base.errors import VoxlineError, redact, redact_url, register_url_secrets
from voxline.realtime.server.engine.scenario import load_scenario, with_transcripts
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.net.app import serve
from voxline.realtime.server.net.config import ServerConfig

from ...eventlog import EventLog
from ...events import SessionError
from ...lockstep import LockstepLoop
from ...report import make_run, write_report
from ...settings import SessionSettings
from ..driver import engine_connector, run_replay
from ..inputs import load_input, load_tools
from ..result import ReplayResult
from .manifest import FarmRecording
from .plan import deal
from .results import Outcome, measure, outcome

__all__ = ["FarmOptions", "replay_recording", "run_farm", "run_part", "run_processes"]


@dataclass(frozen=True)
class FarmOptions:
    """How every replay of a farm runs (plain data: it is pickled to workers and Ray tasks)."""

    out_dir: Path
    settings: SessionSettings  # url and key are filled in per recording for the built-in server
    fast: bool = True
    jobs: int = 8
    url: str | None = None  # None: the built-in server
    voice: str = "auto"
    report: bool = False  # summary.json and report.html per recording
    tail_s: float = 120.0


class _Voices:
    """Each scenario's fixed replies voiced once per process, shared by its replays."""

    def __init__(self, voice: str) -> None:
        self.synth, self.voice = make_synth(voice)
        self._cache: dict[str | None, VoiceCache] = {}

    def get(self, source: str | None, scenario: Any) -> VoiceCache:
        if source not in self._cache:
            self._cache[source] = warm_up(scenario, self.synth)
        return self._cache[source]


async def run_farm(recordings: list[FarmRecording], options: FarmOptions) -> list[Outcome]:
    """Replay ``recordings`` with up to ``options.jobs`` at once; outcomes in the recordings' order."""
    register_url_secrets(options.url)  # in a worker process too: its errors and logs redact them
    clock: Clock
    if options.fast:
        loop = asyncio.get_running_loop()
        if not isinstance(loop, LockstepLoop):
            raise VoxlineError("a fast farm needs the lockstep event loop (see run_part)")
        clock = loop.clock
    else:
        clock = RealClock()
    voices = _Voices(options.voice) if options.fast else None
    gate = asyncio.Semaphore(max(1, options.jobs))

    async def one(recording: FarmRecording) -> Outcome:
        async with gate:
            return await replay_recording(recording, options, clock, voices)

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(r)) for r in recordings]
    return [t.result() for t in tasks]


async def replay_recording(recording: FarmRecording, options: FarmOptions, clock: Clock,
                           voices: _Voices | None = None) -> Outcome:
    """One replay of the farm, judged; a failure to run becomes an ``error`` outcome, never an exception."""
    folder = options.out_dir / recording.name
    heard, events = folder / "heard.wav", folder / "events.jsonl"
    started = time.perf_counter()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        samples = load_input(recording.path, quiet=True)
        result = await _replay(recording, options, clock, voices, samples, heard, events)
        if options.report and result.metrics is not None:
            _write_report(recording, samples, result, heard, folder, options)
    except (VoxlineError, OSError) as exc:
        return Outcome(recording.name, str(recording.path), "error", error=_one_line(exc),
                       wall_s=time.perf_counter() - started)
    except Exception as exc:  # one broken recording must not take the farm's other sessions down
        return Outcome(recording.name, str(recording.path), "error", error=f"{type(exc).__name__}: {_one_line(exc)}",
                       wall_s=time.perf_counter() - started)
    done = outcome(recording.name, str(recording.path), recording.expect, measure(result), heard=str(heard),
                   events=str(events))
    done.wall_s = time.perf_counter() - started
    return done


async def _replay(recording: FarmRecording, options: FarmOptions, clock: Clock, voices: _Voices | None,
                  samples: Any, heard: Path, events: Path) -> ReplayResult:
    tools = load_tools(recording.tools, f"{recording.name}: tools") if recording.tools else None
    scenario = load_scenario(recording.scenario)
    if recording.transcripts is not None:
        scenario = with_transcripts(scenario, recording.transcripts)
    settings = options.settings.model_copy(update={"transcribe": recording.transcripts is not None})
    origin = clock.now()
    with contextlib.closing(EventLog(events, lambda: clock.now() - origin)) as log, \
            contextlib.closing(WavSink(heard)) as sink:
        def on_event(event: Any) -> None:
            log.local(event, getattr(event, "at", None))

        common: dict[str, Any] = {"clock": clock, "sink": sink, "tools": tools, "on_event": on_event,
                                  "tail_s": options.tail_s}
        if voices is not None:
            connector = engine_connector(scenario, clock, voice=voices.voice, on_wire=log.wire,
                                         voices=voices.get(recording.scenario, scenario), api=settings.api)
            return await run_replay(samples, connector=connector, settings=settings, **common)
        if options.url is not None:
            return await run_replay(samples, connector=None, settings=settings, on_wire=log.wire, **common)
        config = ServerConfig(port=0, scenario=recording.scenario, voice=options.voice, transcripts=recording.transcripts)
        async with serve(config) as server:
            local = settings.model_copy(update={"url": server.url})
            return await run_replay(samples, connector=None, settings=local, on_wire=log.wire, **common)


def _write_report(recording: FarmRecording, samples: Any, result: ReplayResult, heard: Path, folder: Path,
                  options: FarmOptions) -> None:
    assert result.metrics is not None
    fatal = [e.message for e in result.events if isinstance(e, SessionError) and e.fatal]
    where = redact_url(options.url) if options.url else "built-in server"
    mode = "lockstep, virtual clock" if options.fast else f"real time, {where}"
    run = make_run(result.metrics, samples, read_wav(heard)[0], input_name=str(recording.path), mode=mode,
                   duration_s=result.duration_s, fatal_errors=fatal)
    write_report(run, html=folder / "report.html", summary=folder / "summary.json")


def _one_line(exc: BaseException) -> str:
    return redact(" ".join(str(exc).split())) or type(exc).__name__


def run_part(recordings: list[dict[str, Any]], options: FarmOptions) -> list[dict[str, Any]]:
    """:func:`run_farm` on a loop of its own (lockstep when fast); plain dicts in and out."""
    parsed = [FarmRecording.model_validate(r) for r in recordings]
    factory = (lambda: LockstepLoop(VirtualClock())) if options.fast else None
    with asyncio.Runner(loop_factory=factory) as runner:
        outcomes = runner.run(run_farm(parsed, options))
    return [o.to_json() for o in outcomes]


async def run_processes(recordings: list[FarmRecording], options: FarmOptions, processes: int) -> list[Outcome]:
    """The recordings dealt over ``processes`` worker processes, each a :func:`run_part` with ``options.jobs``."""
    parts = deal(recordings, processes)
    loop = asyncio.get_running_loop()
    context = multiprocessing.get_context("spawn")  # no fork of a process with a running loop and threads
    with ProcessPoolExecutor(max_workers=len(parts), mp_context=context) as pool:
        futures = [loop.run_in_executor(pool, run_part, [r.model_dump(mode="json") for r in part], options)
                   for part in parts]
        rows = [row for part in await asyncio.gather(*futures) for row in part]
    return order(recordings, [Outcome.from_json(row) for row in rows])


def order(recordings: list[FarmRecording], outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` in the order of ``recordings`` (by name)."""
    rank = {r.name: n for n, r in enumerate(recordings)}
    return sorted(outcomes, key=lambda o: rank.get(o.name, len(rank)))
