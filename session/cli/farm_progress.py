"""A farm's verdicts as they come: one line per recording when it finishes, and on a terminal a
progress line under them (done / passed / failed / errors, elapsed and ETA) drawn with ``rich``.

Not on a terminal (CI logs, a pipe) there is no progress line: the verdict lines alone, each
written and flushed as its recording finishes, so a log shows them as they happen.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from voxline.base.shown import printable

from ..replay.farm import Outcome

__all__ = ["FarmProgress", "verdict_line"]


def verdict_line(o: Outcome) -> str:
    verdict = {"pass": "PASS ", "fail": "FAIL ", "error": "ERROR"}[o.status]
    figures = (f"{o.barge_ins} barge-in{'s' if o.barge_ins != 1 else ''}, {o.reply_heard_s:.1f} s of replies heard "
               f"in {o.duration_s:.1f} s replayed, {o.wall_s:.1f} s wall")
    why = f": {o.message()}" if o.status != "pass" else ""
    return f"  {verdict} {o.name} ({figures}){why}"


class FarmProgress:
    """Shown each outcome as its recording finishes (:meth:`finished`); :meth:`close` at the end."""

    def __init__(self, total: int, out: TextIO | None = None, tty: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.total = total
        self.counts = {"pass": 0, "fail": 0, "error": 0}
        self.shown: set[str] = set()  # the recordings whose verdict was shown
        self.started = time.monotonic()
        self.tty = self.out.isatty() if tty is None else tty
        self._progress: Progress | None = None
        if self.tty and total:
            self._progress = Progress(
                TextColumn("  [bold]{task.completed}/{task.total} done[/]"),
                BarColumn(bar_width=24),
                TextColumn("[green]{task.fields[passed]} passed[/] · [red]{task.fields[failed]} failed[/] · "
                           "{task.fields[errors]} errors · {task.fields[eta]} · elapsed"),
                TimeElapsedColumn(),
                console=Console(file=self.out), transient=True, refresh_per_second=4)
            self._task = self._progress.add_task("farm", total=total, passed=0, failed=0, errors=0, eta="ETA …")
            self._progress.start()

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def eta_s(self) -> float | None:
        """Seconds left at the pace so far (None before the first recording is done)."""
        if not self.done:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)

    def finished(self, outcome: Outcome) -> None:
        self.shown.add(outcome.name)
        self.counts[outcome.status] += 1
        line = printable(verdict_line(outcome))  # its error may quote a server
        if self._progress is None:
            print(line, file=self.out, flush=True)
            return
        self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        eta = self.eta_s()
        self._progress.update(self._task, completed=self.done, passed=self.counts["pass"],
                              failed=self.counts["fail"], errors=self.counts["error"],
                              eta="ETA …" if eta is None else f"ETA {eta:.0f} s", refresh=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
