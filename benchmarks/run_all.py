"""Run every benchmark, print every figure and save them (``--write-results``: under ``benchmarks/results/``).

``python3 -m benchmarks.run_all`` runs, in order: decode (``bench_decode``), truncation
(``bench_truncation``), full-duplex CPU cost (``bench_duplex``), open speakers
(``bench_open_speakers``), the local server's CPU per session (``bench_server``) and concurrent
real-time sessions (``bench_concurrent``). The exit status is
the first non-zero status of a benchmark, else 0.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from . import bench_concurrent, bench_decode, bench_duplex, bench_open_speakers, bench_server, bench_truncation

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS: dict[str, Callable[[list[str] | None], int]] = {
    "decode": bench_decode.main,
    "truncation": bench_truncation.main,
    "duplex": bench_duplex.main,
    "open_speakers": bench_open_speakers.main,
    "server": bench_server.main,
    "concurrent": bench_concurrent.main,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write-results", action="store_true",
                        help="record the figures in benchmarks/results/ (tracked files); default: a temporary folder")
    args = parser.parse_args(argv)
    passed = ["--write-results"] if args.write_results else []
    status = 0
    for name, bench in BENCHMARKS.items():
        print(f"== {name} ==", flush=True)
        start = time.perf_counter()
        code = bench(passed)
        print(f"({name}: {time.perf_counter() - start:.1f} s)\n", flush=True)
        status = status or code
    return status


if __name__ == "__main__":
    raise SystemExit(main())
