"""Run every benchmark and write all their figures into one ``results.json``.

``python3 -m benchmarks.run_all`` runs, in order: decode, encode, truncation (lockstep, with the
device latency modelled), device (truncation on PulseAudio's virtual speaker; skipped, with the
reason, without one), full-duplex CPU cost (duplex), open speakers, the local server's CPU per
session, session setup, memory, and concurrent real-time sessions. Each section is written into
the results file as soon as it is measured, with the date, commit, machine and load around it
(:mod:`benchmarks.record`).

The file is ``results.json`` under ``$VOXLINE_BENCH_OUT`` or the system's temporary folder
unless ``--out FILE`` names another; ``--write-results`` writes the tracked
``benchmarks/results.json`` and regenerates the README's table from it. ``--only`` /
``--skip`` choose sections (the others stay as they are in the file), so
``--only concurrent --write-results`` measures that one again. ``--short`` runs everything on
small sizes, a check that every benchmark works (CI runs it); its figures are not to be quoted
and cannot be written to the tracked file.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import (
    bench_concurrent,
    bench_decode,
    bench_device,
    bench_duplex,
    bench_encode,
    bench_memory,
    bench_open_speakers,
    bench_server,
    bench_setup,
    bench_truncation,
)
from .record import SECTIONS, TRACKED, load, run_section, save_section, target

__all__ = ["BENCHMARKS", "main", "run"]

# every section of results.json and the module that measures it: section(short) -> figures, table(figures) -> text
BENCHMARKS: dict[str, ModuleType] = {
    "decode": bench_decode,
    "encode": bench_encode,
    "truncation": bench_truncation,
    "device": bench_device,
    "duplex": bench_duplex,
    "open_speakers": bench_open_speakers,
    "server": bench_server,
    "setup": bench_setup,
    "memory": bench_memory,
    "concurrent": bench_concurrent,
}
assert tuple(BENCHMARKS) == SECTIONS


def run(names: list[str], path: Path, *, short: bool) -> dict[str, dict[str, Any]]:
    """Measure ``names`` in order, saving each section into ``path`` as soon as it is done."""
    done: dict[str, dict[str, Any]] = {}
    for name in names:
        module = BENCHMARKS[name]
        print(f"== {name} ==", flush=True)
        section = run_section(lambda: module.section(short), short=short)
        save_section(path, name, section)
        if "skipped" in section:
            kept = load(path)["sections"].get(name, {})
            earlier = f" (the figures measured {kept['measured'].get('date')} stay)" if "figures" in kept else ""
            print(f"skipped: {section['skipped']}{earlier}")
        else:
            print(module.table(section["figures"]))
        print(f"({name}: {section['measured']['elapsed_s']:.1f} s)\n", flush=True)
        done[name] = section
    return done


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown section {', '.join(unknown) or text!r}; "
                                         f"the sections are {', '.join(BENCHMARKS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--short", action="store_true", help="every benchmark on small sizes (a check, for CI)")
    parser.add_argument("--only", type=_names, default=None, metavar="NAME,...", help="run only these sections")
    parser.add_argument("--skip", type=_names, default=[], metavar="NAME,...", help="do not run these sections")
    parser.add_argument("--out", type=Path, default=None, help="the results file (default: results.json under "
                        "$VOXLINE_BENCH_OUT or the system's temporary folder)")
    parser.add_argument("--write-results", action="store_true",
                        help=f"write {TRACKED.relative_to(TRACKED.parent.parent)} (tracked) and regenerate the README's table")
    args = parser.parse_args(argv)
    if args.write_results and (args.short or args.out is not None):
        parser.error("--write-results records full runs in the tracked file: not with --short or --out")
    names = [n for n in (args.only or list(BENCHMARKS)) if n not in args.skip]
    path = args.out if args.out is not None else target(args.write_results)
    start = time.perf_counter()
    done = run(names, path, short=args.short)
    skipped = [n for n, s in done.items() if "skipped" in s]
    print(f"{len(done) - len(skipped)} measured, {len(skipped)} skipped ({', '.join(skipped) or 'none'}) in "
          f"{time.perf_counter() - start:.1f} s; written to {path}")
    if args.write_results:
        from .table import update_readme

        print(f"regenerated the benchmark table in {update_readme()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
