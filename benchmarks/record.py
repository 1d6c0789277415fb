"""The one results file: every benchmark's figures in one JSON document, with what measured them.

``results.json`` holds ``{"schema": 1, "sections": {NAME: SECTION}}`` where each section is

* ``{"measured": MEASURED, "figures": {...}}`` -- the figures of one benchmark, or
* ``{"measured": MEASURED, "skipped": "why"}`` -- a benchmark that could not run here (a
  missing program, no sound devices).

``MEASURED`` says when, where and on what: the date (UTC), the git commit (and whether the tree
had uncommitted changes), the machine (CPU model, cores, OS, Python, package versions), the
1-, 5- and 15-minute load average before and after, the host's speed before and after (the
milliseconds a fixed piece of Python work took, :func:`reference_ms`: hosts of one kind differ, and
a shared one slows down), the elapsed wall time and whether it was a ``--short`` run. Sections are written one at a time into the file, so one benchmark can be
measured again without touching the others.

By default the file is ``$VOXLINE_BENCH_OUT/results.json``, else
``<system temporary folder>/voxline-benchmarks/results.json``; only when asked is it the
tracked :data:`TRACKED` (``benchmarks/results.json``), the figures the README's table is made from.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from voxline.base.files import replaced

__all__ = ["ROOT", "SCHEMA", "SECTIONS", "TRACKED", "Measurement", "add_output_arguments", "default_path", "finish",
           "gaps", "git_commit", "load", "machine", "measuring", "problems", "run_section", "save_section", "target",
           "write_standalone"]

ROOT = Path(__file__).resolve().parent.parent
TRACKED = ROOT / "benchmarks" / "results.json"
SCHEMA = 1
# every section run_all writes, in the order of the report
SECTIONS = ("decode", "encode", "truncation", "device", "duplex", "open_speakers", "server", "setup", "memory",
            "concurrent")


def default_path() -> Path:
    """Where figures go unless asked otherwise: never inside the repository."""
    folder = os.environ.get("VOXLINE_BENCH_OUT") or os.path.join(tempfile.gettempdir(), "voxline-benchmarks")
    return Path(folder) / "results.json"


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out FILE`` and ``--write-results`` for a benchmark's own command line."""
    parser.add_argument("--out", type=Path, default=None,
                        help="write this benchmark's figures alone to FILE (default: its section of "
                             "$VOXLINE_BENCH_OUT/results.json, or of results.json under the system's temporary folder)")
    parser.add_argument("--write-results", action="store_true",
                        help="record the figures in the tracked benchmarks/results.json and regenerate the README's table")


def target(write_results: bool) -> Path:
    """The results file: the tracked one only when ``write_results``."""
    return TRACKED if write_results else default_path()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("voxline", "numpy", "soxr", "websockets", "pydantic_core", "pybase64", "openai"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def machine() -> dict[str, Any]:
    """The machine the figures come from."""
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "arch": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": _versions(),
    }


def git_commit() -> dict[str, Any]:
    """The checked-out commit and whether tracked files differ from it (``None`` outside a git tree)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def reference_ms(repeat: int = 5) -> float:
    """How long this host takes for a fixed piece of Python work, in ms (the median of ``repeat`` tries, the
    garbage collector off as :mod:`timeit` has it, so that what a section left behind is not collected in them).

    The work is what every session of the concurrent benchmark does most: 2,000 frames of 100 ms of
    audio decoded (``json.loads`` and base64). Hosts of one kind differ in speed, and a host shared
    with others slows down; figures from two runs compare once each is read against it."""
    from .common import bare_decode, delta_frame

    frame = delta_frame(2400)
    tries = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            for _frame in range(2000):
                bare_decode(frame)
            tries.append(time.perf_counter() - start)
    finally:
        if collecting:
            gc.enable()
    return round(1000 * statistics.median(tries), 2)


class Measurement:
    """What :func:`measuring` fills in: :attr:`info` once the block is done."""

    def __init__(self, short: bool) -> None:
        self.short = short
        self.info: dict[str, Any] = {}


@contextmanager
def measuring(short: bool) -> Iterator[Measurement]:
    """Note date, commit, machine, load and the host's speed (:func:`reference_ms`) before the block; load, the
    host's speed and elapsed time after it."""
    m = Measurement(short)
    date = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    before, speed, start = _load(), reference_ms(), time.perf_counter()
    try:
        yield m
    finally:
        elapsed = round(time.perf_counter() - start, 1)
        m.info = {"date": date, **git_commit(), "short": short, "machine": machine(), "load_before": before,
                  "load_after": _load(), "reference_ms_before": speed, "reference_ms_after": reference_ms(),
                  "elapsed_s": elapsed}


def load(path: Path) -> dict[str, Any]:
    """The results in ``path``; an empty document when there is none yet."""
    if not path.exists():
        return {"schema": SCHEMA, "sections": {}}
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("sections"), dict):
        raise ValueError(f"{path} is not a voxline results file (schema {SCHEMA})")
    return data


def gaps(value: Any, where: str = "") -> list[str]:
    """Paths of every figure in ``value`` that is missing: NaN, infinite or ``null``."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in gaps(v, f"{where}.{k}")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in gaps(v, f"{where}[{i}]")]
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return [where or "."]
    return []


def _json_ready(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None``: JSON has no such numbers, a failed figure is ``null``."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


MEASURED_KEYS = ("date", "commit", "dirty", "short", "machine", "load_before", "load_after", "elapsed_s")
MACHINE_KEYS = ("cpu_model", "cores", "arch", "os", "python", "implementation", "packages")


def problems(data: dict[str, Any]) -> list[str]:
    """What is wrong with a results document: unknown or malformed sections, missing figures (empty: nothing)."""
    found = []
    if data.get("schema") != SCHEMA or not isinstance(data.get("sections"), dict):
        return [f"not a results document of schema {SCHEMA}"]
    for name, section in data["sections"].items():
        if name not in SECTIONS:
            found.append(f"{name}: unknown section")
            continue
        measured = section.get("measured", {})
        found += [f"{name}: measured.{k} missing" for k in MEASURED_KEYS if k not in measured]
        found += [f"{name}: measured.machine.{k} missing" for k in MACHINE_KEYS if k not in measured.get("machine", {})]
        if len(measured.get("load_before", ())) != 3 or len(measured.get("load_after", ())) != 3:
            found.append(f"{name}: load averages are not 1/5/15 min triples")
        if ("figures" in section) == ("skipped" in section):
            found.append(f"{name}: needs either figures or the reason it was skipped")
        elif "figures" in section:
            if not isinstance(section["figures"], dict) or not section["figures"]:
                found.append(f"{name}: empty figures")
            found += [f"{name}: figure {path} is missing" for path in gaps(section["figures"])]
        elif not isinstance(section["skipped"], str) or not section["skipped"]:
            found.append(f"{name}: skipped without a reason")
    return found


def run_section(measure: Callable[[], dict[str, Any]], *, short: bool) -> dict[str, Any]:
    """Run one benchmark: ``{"measured", "figures"}``, or ``{"measured", "skipped"}`` when it cannot run here."""
    from .common import Unavailable

    with measuring(short) as m:
        try:
            figures: dict[str, Any] | None = measure()
            skipped = None
        except Unavailable as exc:
            figures, skipped = None, str(exc)
    return {"measured": m.info, "skipped": skipped} if figures is None else {"measured": m.info, "figures": figures}


def measure_and_report(args: argparse.Namespace, name: str, measure: Callable[[], dict[str, Any]],
                       table: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """A benchmark's own command line: measure (full size), print its table, save it where ``args`` say."""
    done = run_section(measure, short=False)
    print(table(done["figures"]))
    print(f"written to {finish(args, name, done)}")
    return done


def finish(args: argparse.Namespace, name: str, section: dict[str, Any]) -> Path:
    """Where a benchmark's own command line puts its section (see :func:`add_output_arguments`)."""
    if args.out is not None:
        return write_standalone(Path(args.out), section.get("figures") or section)
    path = save_section(target(args.write_results), name, section)
    if args.write_results:
        from .table import update_readme

        update_readme()
    return path


def save_section(path: Path, name: str, section: dict[str, Any]) -> Path:
    """Put ``section`` under ``name`` in the results file at ``path``, keeping the other sections.

    A section that could not run here (``skipped``) does not replace figures measured before
    (e.g. the device section on a machine without PulseAudio): those stay, with their own
    date and commit.
    """
    if name not in SECTIONS:
        raise ValueError(f"unknown section {name!r}; the sections are {', '.join(SECTIONS)}")
    data = load(path)
    if "skipped" in section and "figures" in data["sections"].get(name, {}):
        return path
    data["sections"][name] = section
    data["sections"] = {k: data["sections"][k] for k in SECTIONS if k in data["sections"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_json_ready(data), indent=1, allow_nan=False) + "\n"
    with replaced(path) as file:
        file.write(text.encode("utf-8"))
    return path


def write_standalone(path: Path, figures: dict[str, Any]) -> Path:
    """One benchmark's figures alone (``--out FILE``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2) + "\n")
    return path
