"""``voxline replay`` on many recordings: the farm's flags, their checks, and the report it prints.

Several inputs, a directory or ``--manifest`` make a farm
(:mod:`voxline.session.replay.farm`); one recording keeps the single replay of
:mod:`.replay`. Every mistake is one line before any session starts.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
import time
from pathlib import Path

from pydantic import SecretStr

from voxline.base.cli_numbers import number_option
from voxline.base.errors import OutputError
from voxline.base.redaction import redact_url
from voxline.base.files import STDOUT, drop_stale, each_written, nonempty_path, shown
from voxline.base.urls import LOCAL_KEY
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.realtime.server.engine.voices import make_synth

from ..replay.farm import (
    FarmOptions,
    FarmRecording,
    Outcome,
    VerdictJournal,
    load_manifest,
    parse_shard,
    recordings_from_paths,
    run_farm,
    run_processes,
    summary_line,
    write_jsonl,
    write_junit,
)
from ..replay.farm.layout import assign_folders, check_outputs
from ..replay.farm.runner import OutcomeHook
from ..replay.inputs import load_tools
from ..settings import SessionSettings, UsageError, load_settings
from .endpoint import built_in_only
from .farm_progress import FarmProgress
from .option_values import optional_value
from .paths import document_path, folder_path, read_with, writable
from .stopping import Stop

__all__ = ["add_arguments", "in_this_loop", "is_farm", "refuse_farm_flags", "run"]

FARM_ONLY = ("manifest", "out_dir", "junit", "results", "shard", "jobs", "processes", "ray")
SINGLE_ONLY = {"out": "--out", "events": "--events", "report": "--report", "summary": "--summary",
               "echo": "--echo", "aec": "--aec", "local_vad": "--local-vad", "grace_ms": "--grace-ms",
               "no_resume": "--no-resume",
               "channel": "--channel", "stereo_out": "--stereo-out"}


def _positive(text: str) -> int:
    return number_option(text, int, lambda v: v >= 1, "a whole number of at least 1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("replay farms (several recordings, a directory or --manifest)")
    group.add_argument("--manifest", type=nonempty_path, metavar="FARM.toml",
                       help="recordings with their scenario, tools, transcripts and expectations (see README)")
    group.add_argument("--out-dir", type=folder_path, metavar="DIR",
                       help="farm output: DIR/NAME/heard.wav and events.jsonl per recording (NAME made safe and "
                            "unique), DIR/results.jsonl")
    group.add_argument("--results", type=document_path("JSON lines"), metavar="RESULTS.jsonl",
                       help="one JSON line per recording (default DIR/results.jsonl; - for stdout)")
    group.add_argument("--junit", type=document_path("XML"), metavar="JUNIT.xml",
                       help="also write a JUnit XML report for CI (- for stdout)")
    group.add_argument("--farm-report", action="store_true",
                       help="also write DIR/NAME/summary.json and report.html per recording")
    group.add_argument("--farm-stereo", action="store_true",
                       help="also write DIR/NAME/stereo.wav per recording: left the input, right what the listener "
                            "heard, sample-aligned (the input of full-duplex scorers)")
    group.add_argument("--jobs", type=_positive, default=None, metavar="N",
                       help="sessions at once in each process (default 8)")
    group.add_argument("--processes", type=_positive, default=None, metavar="P",
                       help="worker processes, each running --jobs sessions (default 1); with --ray, the number of "
                            "Ray tasks (default: one per --jobs recordings)")
    group.add_argument("--shard", metavar="I/N",
                       help="run only shard I of N (0-based: 0/4 … 3/4) of the sorted recordings, e.g. "
                            "$(JOB_COMPLETION_INDEX)/N in a Kubernetes Indexed Job")
    optional_value(group.add_argument(
        "--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="run the parts as Ray tasks (needs voxline[ray]); ADDRESS of a cluster, e.g. auto or "
             "ray://head:10001 (default: RAY_ADDRESS, else a local instance)"), _may_be_ray_address)


def _may_be_ray_address(word: str) -> bool:
    """``auto``, ``local``, ``ray://HOST:PORT`` or ``HOST:PORT``: not a recording or a directory of them."""
    return (word in ("auto", "local") or "://" in word
            or re.fullmatch(r"[\w.\-]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+", word) is not None)


def is_farm(args: argparse.Namespace) -> bool:
    """Several recordings, a directory, ``--manifest``, or one recording with ``--out-dir`` or ``--junit``
    (a farm of one: its outputs under DIR/NAME/, judged, with a results file and JUnit XML)."""
    inputs = args.inputs or []
    return (args.manifest is not None or len(inputs) > 1 or any(Path(p).is_dir() for p in inputs)
            or args.out_dir is not None or args.junit is not None)


def in_this_loop(args: argparse.Namespace) -> bool:
    """Whether the farm's sessions run on the command's own loop (not in workers or Ray tasks)."""
    return args.ray is None and (args.processes or 1) == 1


def refuse_farm_flags(args: argparse.Namespace) -> None:
    given = [f"--{name.replace('_', '-')}" for name in FARM_ONLY if getattr(args, name) not in (None, False)]
    given += ["--farm-report"] if args.farm_report else []
    given += ["--farm-stereo"] if args.farm_stereo else []
    if given:
        raise UsageError(f"{', '.join(given)} {_apply(given)} to a farm: give several recordings, a directory or "
                         "--manifest")


def _apply(flags: list[str]) -> str:
    return "applies" if len(flags) == 1 else "apply"


def _check(args: argparse.Namespace, url: str | None) -> None:
    given = [flag for name, flag in SINGLE_ONLY.items() if getattr(args, name, None) not in (None, False)]
    if given:
        why = "--junit makes a farm, even of one recording, and " if args.junit is not None and len(args.inputs) == 1 \
            else ""
        raise UsageError(f"{why}{', '.join(given)} {_apply(given)} to a single replay; a farm writes DIR/NAME/heard.wav "
                         "and events.jsonl under --out-dir (--farm-report for reports)")
    if args.out_dir is None:
        why = "--junit makes a farm, which" if args.junit is not None and len(args.inputs) == 1 else "a farm"
        raise UsageError(f"{why} needs --out-dir DIR for its recordings' outputs and results")
    if args.out_dir is STDOUT:
        raise UsageError("--out-dir takes a folder, not '-' (stdout is for --results and --junit; a folder called "
                         "'-' is ./-)")
    if args.manifest is not None and args.inputs:
        raise UsageError("give recordings or --manifest, not both")
    if url:
        built_in_only(args)
    if args.out_dir.exists() and not args.out_dir.is_dir():
        raise ConfigurationError(f"--out-dir {args.out_dir}: it is not a directory")
    for path in (args.results, args.junit):
        if path is not None and path.is_dir():
            raise ConfigurationError(f"cannot write {path}: it is a directory")


def _folder(flag: str, folder: Path, of: Path | None = None) -> list[Path]:
    """``folder`` made if missing, with its parents; the folders made."""
    missing = [f for f in (folder, *folder.parents) if not f.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f"{of}: cannot make its folder {folder}" if of is not None else f"{folder}: cannot make it"
        raise ConfigurationError(f"{flag} {where} ({exc.strerror or exc})") from None
    return missing


def _recordings(args: argparse.Namespace, url: str | None) -> list[FarmRecording]:
    """The farm's recordings (sorted by name), flags as defaults, the shard taken, every setting loaded once."""
    recordings = load_manifest(args.manifest) if args.manifest is not None else recordings_from_paths(args.inputs)
    defaults = {"scenario": args.scenario, "tools": args.tools}
    recordings = [r.model_copy(update={k: v for k, v in defaults.items() if v is not None and getattr(r, k) is None})
                  for r in recordings]
    if args.shard is not None:
        recordings = parse_shard(args.shard).take(recordings)
    if args.tools:
        load_tools(args.tools)  # the flag's own error first
    given = f"manifest {args.manifest}: " if args.manifest is not None else ""
    for scenario in dict.fromkeys(r.scenario for r in recordings):
        first = next(r.name for r in recordings if r.scenario == scenario)
        if url and scenario is not None:  # the flag was refused already; a manifest's would be ignored
            named = "--url names a server" if args.url else "VOXLINE_URL names a server (--local ignores it)"
            raise ConfigurationError(f"{given}{first}: scenario {scenario!r} applies to the built-in server only, "
                                     f"and {named}")
        try:
            load_scenario(scenario)  # a bad scenario is one line before anything starts
        except ConfigurationError as exc:  # in the flag, a usage error (2) stays one; in a manifest, its content's (1)
            if scenario == args.scenario:
                raise
            raise ConfigurationError(f"{given}{first}: scenario: {exc.message}") from None
    for r in recordings:
        if r.tools:
            load_tools(r.tools, f"{given if r.tools != args.tools else ''}{r.name}: tools")
    return recordings


def _options(args: argparse.Namespace, url: str | None) -> FarmOptions:
    from .replay import token_for

    settings = load_settings(SessionSettings, model=args.model, transport=args.transport, api=args.api,
                             vad_threshold=args.vad_threshold, silence_ms=args.silence_ms)
    if args.fast and settings.transport == "webrtc":
        raise UsageError("--fast runs in lockstep without media tracks; it cannot use --transport webrtc")
    token = token_for(url) if url else LOCAL_KEY
    settings = settings.model_copy(update={"url": url or "ws://local", "api_key": SecretStr(token),
                                           "turn_detection": "server_vad"})
    voice = args.voice
    if not url:
        make_synth(voice)  # an unknown or missing voice: one line now
    return FarmOptions(out_dir=args.out_dir.resolve(), settings=settings, fast=args.fast, jobs=args.jobs or 8,
                       url=url, voice=voice, report=args.farm_report, stereo=args.farm_stereo)


async def run(args: argparse.Namespace) -> int:
    from .replay import SERVER_NOTE, target_url

    url = target_url(args)
    _check(args, url)
    if args.ray is not None:
        from ..replay.farm.ray_backend import check_ray

        check_ray(args.ray or None)  # not installed, or no cluster there: one line before anything starts
    results = args.results or args.out_dir / "results.jsonl"
    recordings = _place(args, _recordings(args, url), results)
    options = _options(args, url)
    made = _folder("--out-dir", args.out_dir)
    try:
        for flag, path in (("--results" if args.results else "--out-dir", results), ("--junit", args.junit)):
            if path is not None:  # found now, not after every recording has run
                made += _folder(flag, path.parent, path)
                writable(path, flag)
    except ConfigurationError:  # refused before anything ran: no empty folder of ours is left behind
        for folder in sorted(made, key=lambda f: len(f.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    where = "lockstep, virtual clock" if args.fast else f"real time, {redact_url(url) if url else 'a built-in server per recording'}"
    shard = f", shard {args.shard}" if args.shard else ""
    count = f"{len(recordings)} recording{'s' if len(recordings) != 1 else ''}"
    print(f"voxline: farm of {count}{shard} ({where}; {_spread(args, len(recordings))})"
          + ("" if url else f"; built-in server: {SERVER_NOTE}"), file=sys.stderr)
    started = time.perf_counter()
    if args.junit is not None:
        drop_stale(args.junit)  # a farm killed outright leaves no JUnit, rather than the last run's
    journal = VerdictJournal(results)  # and the verdicts it reached, rather than the last run's

    def finished(outcome: Outcome) -> None:
        journal.add(outcome)  # on disk before its line is printed: whoever reads the line finds it there
        progress.finished(outcome)

    with Stop() as stop:
        progress = FarmProgress(len(recordings))
        try:
            outcomes = await _execute(args, recordings, options, stop, finished)
            for o in outcomes:
                if o.name not in progress.shown:  # never reported: a worker stopped or died before it ran
                    finished(o)
        finally:
            progress.close()
            journal.close()
        wall = time.perf_counter() - started
        junit = args.junit
        unwritten: OSError | OutputError | None = None
        try:
            each_written(lambda: write_jsonl(results, outcomes),
                         *([lambda: write_junit(junit, outcomes, wall)] if junit is not None else []))
        except BrokenPipeError:
            raise
        except (OSError, OutputError) as exc:  # said after the farm's summary, which is still true
            unwritten = exc
    print(summary_line(outcomes, wall))
    if stop.stopped:
        ran = sum(o.status != "error" or not (o.error or "").startswith("interrupted") for o in outcomes)
        print(f"voxline: interrupted by {stop.name}: {ran} of {len(outcomes)} recordings finished; the rest are "
              "errors (interrupted)", file=sys.stderr)
    if unwritten is not None:
        raise unwritten
    print(f"wrote {shown(results)}" + (f" and {shown(args.junit)}" if args.junit else "") + f"; outputs under {shown(args.out_dir)}")
    if stop.stopped:
        return stop.exit_code
    return 0 if all(o.status == "pass" for o in outcomes) else 1


def _place(args: argparse.Namespace, recordings: list[FarmRecording], results: Path) -> list[FarmRecording]:
    """Each recording's safe, unique folder under --out-dir (never the name of a file the farm writes there),
    and no output over an input, the manifest or another output."""
    out_dir = args.out_dir
    files = [results, *([args.junit] if args.junit is not None else [])]
    taken = [p.name for p in files if os.path.realpath(p.parent) == os.path.realpath(out_dir)]
    if out_dir.is_dir():
        taken += [p.name for p in out_dir.iterdir() if not p.is_dir()]
    placed = assign_folders(recordings, taken)
    inputs = [*([args.manifest] if args.manifest is not None else []),
              *(path for r in placed for path in read_with(r.path, r.scenario or args.scenario, r.tools or args.tools))]
    check_outputs(placed, out_dir, files, inputs)
    return placed


async def _execute(args: argparse.Namespace, recordings: list[FarmRecording], options: FarmOptions, stop: Stop,
                   on_outcome: OutcomeHook) -> list[Outcome]:
    if not recordings:
        return []
    if args.ray is not None:
        from ..replay.farm.ray_backend import run_ray

        tasks = args.processes or math.ceil(len(recordings) / options.jobs)
        # on the main thread, where Ray sets its signal handlers; this loop has nothing else to run meanwhile
        return run_ray(recordings, options, tasks, args.ray or None, lambda: stop.stopped, on_outcome)
    if (args.processes or 1) > 1:
        return await run_processes(recordings, options, args.processes, stop.event, on_outcome)
    return await run_farm(recordings, options, stop.event, on_outcome)


def _spread(args: argparse.Namespace, count: int) -> str:
    jobs = args.jobs or 8
    if args.ray is not None:
        return f"Ray tasks of up to {jobs} session{'s' if jobs > 1 else ''} at once"
    processes = max(1, min(args.processes or 1, count))  # the workers started: one has a recording at least
    return (f"{processes} process{'es' if processes > 1 else ''} × up to {jobs} session{'s' if jobs > 1 else ''} at "
            f"once, cpu count {os.cpu_count()}")
