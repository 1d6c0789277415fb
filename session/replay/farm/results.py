"""A farm's verdicts as plain data: what each recording measured, which expectations held.

:class:`Outcome` is built from a replay's figures (:func:`measure`) and judged against a
recording's :class:`~.manifest.Expectations` (:func:`judge`) without I/O; it travels
between processes (and Ray tasks) as a dict (:meth:`Outcome.to_json`). The results file is
one JSON object per line and recording (:func:`write_jsonl`)::

    {"name", "input", "status": "pass"|"fail"|"error", "checks": [{"name", "expected", "measured", "ok"}],
     "barge_ins", "cut_errors_ms", "reply_latencies_ms", "error_codes", "error", "duration_s", "reply_heard_s",
     "wall_s", "heard", "events", "summary", "report", "stereo"}

``heard`` … ``stereo`` are the paths of the files the recording wrote (``summary`` and ``report`` with
``--farm-report``, ``stereo`` with ``--farm-stereo``), ``null`` for those it did not.

``duration_s`` is the listener time the replay covered (the length of its heard WAV),
``reply_heard_s`` the assistant audio that reached the listener in it.

``status`` is ``error`` when the replay could not run or ended on a fatal session error,
``fail`` when it ran and an expectation did not hold.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, assert_never

from voxline.base.files import fresh_file, replaced, utf8

from ..result import ReplayResult
from ...events import SessionError
from ...tools.events import ToolFinished
from .manifest import Expectations, Range

__all__ = ["Check", "Measured", "Outcome", "VerdictJournal", "describe", "judge", "measure", "outcome", "summary_line",
           "write_jsonl"]

Status = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class Check:
    name: str  # barge_ins, max_cut_error_ms, max_reply_latency_ms, no_errors
    expected: str
    measured: Any
    ok: bool


@dataclass(frozen=True)
class Measured:
    """The figures of one replay that expectations are judged on."""

    barge_ins: int = 0
    cut_errors_ms: list[float] = field(default_factory=list)  # applied − heard, one per barge-in that cut
    reply_latencies_ms: list[float] = field(default_factory=list)  # one per turn that was answered
    # every SessionError ("error" if it had no code) and failed tool call ("tool_failed:NAME"), in order
    error_codes: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)  # messages of the fatal ones
    duration_s: float = 0.0
    reply_heard_s: float = 0.0  # assistant audio that reached the listener, every item summed


@dataclass
class Outcome:
    name: str
    input: str
    status: Status
    checks: list[Check] = field(default_factory=list)
    barge_ins: int = 0
    cut_errors_ms: list[float] = field(default_factory=list)
    reply_latencies_ms: list[float] = field(default_factory=list)
    error_codes: list[str] = field(default_factory=list)
    error: str | None = None  # why the replay errored (one line)
    duration_s: float = 0.0  # listener time covered
    reply_heard_s: float = 0.0  # assistant audio that reached the listener
    wall_s: float = 0.0
    heard: str | None = None
    events: str | None = None
    summary: str | None = None
    report: str | None = None
    stereo: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(**{**data, "checks": [Check(**c) for c in data.get("checks", [])]})

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def message(self) -> str:
        """One line: why it did not pass (empty when it did)."""
        if self.status == "error":
            return self.error or "error"
        return "; ".join(map(describe, self.failed_checks))


def describe(check: Check) -> str:
    """``barge_ins: expected 2, measured 1``."""
    return f"{check.name}: expected {check.expected}, measured {_show(check.measured)}"


def _error_code(event: SessionError | ToolFinished) -> str:
    """``server_silent``, or ``error`` for an error with no code, or ``tool_failed:lookup``."""
    match event:
        case SessionError():
            return event.code or "error"
        case ToolFinished():
            return f"tool_failed:{event.name}"
        case _:
            assert_never(event)


def measure(result: ReplayResult) -> Measured:
    """The judged figures of a finished replay."""
    errors = [e for e in result.events if isinstance(e, SessionError)]
    metrics = result.metrics
    barge_ins = metrics.barge_ins if metrics is not None else ()
    turns = metrics.turns if metrics is not None else ()
    return Measured(
        barge_ins=len(barge_ins) if metrics is not None else len(result.barge_ins),
        cut_errors_ms=[round(b.cut_error_ms, 3) for b in barge_ins if b.cut_error_ms is not None],
        reply_latencies_ms=[round(t.reply_latency_ms, 3) for t in turns if t.reply_latency_ms is not None],
        # a tool that failed is an error the session reported too (its call was answered with it)
        error_codes=[_error_code(e) for e in result.events if isinstance(e, SessionError)
                     or (isinstance(e, ToolFinished) and not e.ok)],
        fatal=[e.message for e in errors if e.fatal],
        duration_s=round(result.duration_s, 3),
        reply_heard_s=round(sum(i.heard_ms for i in metrics.items) / 1000, 3) if metrics is not None else 0.0,
    )


def judge(expect: Expectations, m: Measured) -> list[Check]:
    """One :class:`Check` per expectation that is set, in a fixed order."""
    checks: list[Check] = []
    match expect.barge_ins:
        case None:
            pass
        case Range() as r:
            checks.append(Check("barge_ins", str(r), m.barge_ins, r.holds(m.barge_ins)))
        case int() as exact:
            checks.append(Check("barge_ins", str(exact), m.barge_ins, m.barge_ins == exact))
    if expect.max_cut_error_ms is not None:
        worst = max((abs(e) for e in m.cut_errors_ms), default=0.0)
        checks.append(Check("max_cut_error_ms", f"<= {expect.max_cut_error_ms:g}", worst,
                            worst <= expect.max_cut_error_ms))
    if expect.max_reply_latency_ms is not None:
        worst = max(m.reply_latencies_ms, default=0.0)
        checks.append(Check("max_reply_latency_ms", f"<= {expect.max_reply_latency_ms:g}", worst,
                            worst <= expect.max_reply_latency_ms))
    if expect.no_errors:
        checks.append(Check("no_errors", "none", m.error_codes, not m.error_codes))
    return checks


def outcome(name: str, input: str, expect: Expectations, m: Measured, **paths: Any) -> Outcome:
    """The verdict on one replay that ran: ``error`` on a fatal session error, else pass or fail."""
    checks = judge(expect, m)
    status: Status = "error" if m.fatal else "pass" if all(c.ok for c in checks) else "fail"
    return Outcome(name, input, status, checks, m.barge_ins, m.cut_errors_ms, m.reply_latencies_ms, m.error_codes,
                   error="; ".join(m.fatal) or None, duration_s=m.duration_s, reply_heard_s=m.reply_heard_s,
                   **paths)


def write_jsonl(path: Path, outcomes: list[Outcome]) -> None:
    """One JSON line per recording, written whole (:func:`~voxline.base.files.replaced`)."""
    with replaced(path) as out:
        for o in outcomes:
            out.write(_line(o))


def _line(outcome: Outcome) -> bytes:
    return utf8(json.dumps(outcome.to_json(), ensure_ascii=False) + "\n")


class VerdictJournal:
    """Each verdict appended to a farm's results file as the farm reaches it, one whole line at a time: a farm
    killed outright (SIGKILL, a machine that went down) leaves the verdicts it reached, never a previous run's
    next to this run's audio. The file is started empty; at the end :func:`write_jsonl` writes it whole again, in
    the farm's order. Only a file written whole by renaming (:func:`~voxline.base.files.fresh_file`) is journaled,
    on a new file in its place: stdout, devices and streams get the whole file at the end only. A journal that
    cannot be written (a full disk) stops; the end says so if it fails too."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: BinaryIO | None = fresh_file(path)  # none where the end's write goes in place (stdout)
        except OSError:
            self._file = None  # said by the whole write at the end, which fails the same way

    def add(self, outcome: Outcome) -> None:
        file = self._file
        if file is None:
            return
        try:
            file.write(_line(outcome))
            file.flush()
        except OSError:
            self.close()

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()


def summary_line(outcomes: list[Outcome], wall_s: float) -> str:
    counts = {s: sum(o.status == s for o in outcomes) for s in ("pass", "fail", "error")}
    return (f"farm: {_count(len(outcomes), 'recording')}, {counts['pass']} passed, {counts['fail']} failed, "
            f"{_count(counts['error'], 'error')} in {wall_s:.1f} s")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)
