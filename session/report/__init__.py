"""The session report: SUMMARY.json for machines and REPORT.html for people, from the session metrics.

:func:`write_report` takes a :class:`~voxline.session.metrics.MetricsReport` and the
microphone and heard audio, and writes either or both files. :mod:`.summary` builds the
JSON, :mod:`.svg` the timeline plot, :mod:`.html` the page (several runs for a replay farm).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voxline.base.errors import OutputError
from voxline.base.redaction import redacted
from voxline.base.files import drop_stale, each_written, replaced, utf8

from ..metrics import MetricsReport
from .html import Run, display, render_report
from .summary import build_summary, fmt, lookup
from .svg import Audio, timeline_svg

__all__ = ["Run", "build_summary", "display", "fmt", "lookup", "make_run", "render_report", "timeline_svg",
           "write_report"]


def make_run(report: MetricsReport, mic: Audio | None, heard: Audio | None, **summary: Any) -> Run:
    """A :class:`Run` for the page: the summary (``summary`` goes to :func:`build_summary`) and its plot
    (the waveforms as samples, or as feeds read once: :func:`timeline_svg`)."""
    # what a server said may echo a key it was given (a transcript, an error): the page and the JSON show none;
    # the input's path is the user's own, named as given (a folder called sk-2024-calls is no key)
    built = redacted(build_summary(report, **summary))
    built["input"] = summary.get("input_name", built["input"])
    return Run(built, timeline_svg(report, mic, heard))


def _write(path: Path, text: str) -> None:
    """Write whole (:func:`~voxline.base.files.replaced`); a failure is one :class:`OutputError` line, and leaves
    no last run's file in its place (it would pass for this run's)."""
    try:
        with replaced(path) as file:
            file.write(utf8(text))
    except BrokenPipeError:
        raise  # stdout's reader went away: nothing to tell it (the command ends quietly)
    except OSError as exc:
        drop_stale(path)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_report(run: Run, *, html: Path | None = None, summary: Path | None = None) -> None:
    """Write REPORT.html and/or SUMMARY.json for one run (both, even when stdout's reader went away from one)."""
    writes: list[Callable[[], None]] = []
    if summary is not None:
        writes.append(lambda: _write(summary, json.dumps(run.summary, ensure_ascii=False, indent=1) + "\n"))
    if html is not None:
        writes.append(lambda: _write(html, render_report([run])))
    each_written(*writes)
