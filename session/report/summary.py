"""SUMMARY.json: the figures of one session (or replay) for machines, and the checks it passed.

``build_summary`` reads a :class:`~voxline.session.metrics.MetricsReport` and returns plain
JSON types (``version`` 1)::

    {"version": 1, "input": ..., "mode": ..., "duration_s": ...,
     "turns": [{"index", "speech_end_at", "first_heard_at", "reply_latency_ms",
                "first_delta_ms", "client_ms", "vad_ms", "underruns", ...}],
     "barge_ins": [{"at", "silent_at", "item_id", "audio_end_ms", "applied_ms", "heard_ms",
                    "received_ms", "reaction_ms", "onset_to_silence_ms", "cut_error_ms",
                    "heard_text", "full_text", "text_method", ...}],
     "items": [...], "speech": [...], "tools": [...],
     "underruns": {"events", "ms"}, "aggregates": {figure: {"count", "p50", "p95", "min", "max"}},
     "checks": [{"name", "ok", "detail"}], "pass": bool}

The HTML report (:mod:`.html`) shows the same numbers, formatted by :func:`fmt`.
"""

from __future__ import annotations

import math
from typing import Any

from ..metrics import MetricsReport

__all__ = ["CUT_TOLERANCE_MS", "build_summary", "fmt", "lookup"]

CUT_TOLERANCE_MS = 1.0  # audio_end_ms is whole milliseconds: up to 1 ms below what was heard


def fmt(value: Any) -> str:
    """How the report prints a figure: numbers with two decimals (ms), whole numbers and text as they are."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:.2f}"
    return str(value)


def fmt_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def lookup(summary: dict[str, Any], path: str) -> Any:
    """``"barge_ins.0.heard_ms"`` → that value of the summary."""
    node: Any = summary
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _checks(report: MetricsReport, errors: list[str]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for n, b in enumerate(report.barge_ins):
        if b.applied_ms is None:
            continue
        over = b.applied_ms > b.heard_ms + 1e-6
        short = b.heard_ms - b.applied_ms >= CUT_TOLERANCE_MS
        checks.append({"name": f"barge-in {n + 1}: cut at what was heard",
                       "ok": not over and not short and b.applied_ms <= b.received_ms + 1e-6,
                       "detail": f"audio_end_ms {b.applied_ms}, heard {b.heard_ms:.1f} ms, "
                                 f"received {b.received_ms:.1f} ms"})
        if b.cut_error_ms is not None:
            checks.append({"name": f"barge-in {n + 1}: ledger agrees after the fade",
                           "ok": -CUT_TOLERANCE_MS < b.cut_error_ms <= 1e-6,
                           "detail": f"cut error {b.cut_error_ms:.3f} ms"})
    checks.append({"name": "no fatal session error", "ok": not errors, "detail": "; ".join(errors) or "none"})
    return checks


def build_summary(report: MetricsReport, *, input_name: str = "", mode: str = "", duration_s: float | None = None,
                  fatal_errors: list[str] | None = None,
                  expectations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary of ``report``; ``fatal_errors`` (messages) fail the run, and so does any of ``expectations``
    (checks of the same shape, ``name``, ``ok``, ``detail``: a farm manifest's, judged) that does not hold."""
    data = report.to_json()
    checks = _checks(report, list(fatal_errors or [])) + list(expectations or [])
    return {
        "version": 1,
        "input": input_name,
        "mode": mode,
        "duration_s": round(report.at if duration_s is None else duration_s, 6),  # no float noise in a file
        **{key: data[key] for key in ("turns", "barge_ins", "items", "speech", "tools", "underruns", "aggregates")},
        "checks": checks,
        "pass": all(c["ok"] for c in checks),
    }
