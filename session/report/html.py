"""REPORT.html: one self-contained page (inline SVG and CSS, no scripts, no network) per session or farm.

For each run: a header with its verdict, the timeline plot (:mod:`.svg`), the heard part of
every cut reply, and tables of the turns, barge-ins, aggregates and checks. Several runs
(a replay farm) share one page, with an overview of pass/fail per recording first. Every
figure cell carries ``data-figure="<path in the summary>"`` and shows :func:`display` of
the summary's value, so the page can be checked against SUMMARY.json.

It reads at any width: the plot scales down to the window and, below the width its labels need,
scrolls sideways in its own box, as every table does; the page itself never does. Barge-ins
are numbered in the table as on the plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from .summary import fmt, fmt_s, lookup

__all__ = ["Run", "display", "render_report"]


@dataclass(frozen=True)
class Run:
    """One recording's summary (:func:`~.summary.build_summary`) and its timeline SVG."""

    summary: dict[str, Any]
    svg: str


def display(path: str, value: Any) -> str:
    """How the figure at ``path`` is printed: instants (``at``, ``*_at``) in s to the ms, the rest by :func:`fmt`."""
    key = path.rsplit(".", 1)[-1]
    if (key == "at" or key.endswith("_at")) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_s(float(value))
    return fmt(value)


def _cell(summary: dict[str, Any], path: str, run: int) -> str:
    value = lookup(summary, path)
    return f'<td data-figure="{escape(path)}" data-run="{run}">{escape(display(path, value))}</td>'


_TURN_COLUMNS = [("index", "turn"), ("speech_end_at", "speech end (s)"), ("first_delta_at", "first delta (s)"),
                 ("first_heard_at", "first heard (s)"), ("reply_latency_ms", "reply latency as heard (ms)"),
                 ("first_delta_ms", "→ first delta (ms)"), ("client_ms", "client share (ms)"),
                 ("vad_ms", "VAD wait (ms)"), ("underruns", "underruns"), ("underrun_ms", "underrun (ms)"),
                 ("barge_ins", "barge-ins")]
_CUT_COLUMNS = [("trigger", "trigger"), ("at", "triggered (s)"), ("silent_at", "silent (s)"), ("item_id", "item"),
                ("audio_end_ms", "audio_end_ms"), ("applied_ms", "kept (ms)"), ("heard_ms", "heard (ms)"),
                ("received_ms", "received (ms)"), ("reaction_ms", "reaction (ms)"),
                ("onset_to_silence_ms", "onset → silence (ms)"), ("cut_error_ms", "cut error (ms)"),
                ("in_device_ms", "in device (ms)"), ("unplayed_ms", "unplayed (ms)")]
_AGG_NAMES = {"reply_latency_ms": "reply latency as heard", "first_delta_ms": "speech end → first delta",
              "client_ms": "client share (delta → listener)", "barge_in_reaction_ms": "barge-in reaction",
              "onset_to_silence_ms": "user onset → silence", "cut_error_ms": "cut error (kept − heard)"}


def _table(summary: dict[str, Any], key: str, columns: list[tuple[str, str]], run: int, caption: str,
           numbered: bool = False) -> str:
    rows = summary[key]
    if not rows:
        return f"<h3>{escape(caption)}</h3><p class='none'>none</p>"
    head = ("<th>#</th>" if numbered else "") + "".join(f"<th>{escape(title)}</th>" for _field, title in columns)
    body = "".join("<tr>" + (f"<td class='n'>{n + 1}</td>" if numbered else "")
                   + "".join(_cell(summary, f"{key}.{n}.{name}", run) for name, _t in columns) + "</tr>"
                   for n in range(len(rows)))
    return f"<h3>{escape(caption)}</h3><div class='table-wrap'><table class='{key}'><tr>{head}</tr>{body}</table></div>"


def _aggregates(summary: dict[str, Any], run: int) -> str:
    head = "<tr><th>figure</th><th>count</th><th>p50 (ms)</th><th>p95 (ms)</th><th>min (ms)</th><th>max (ms)</th></tr>"
    rows = []
    for name, title in _AGG_NAMES.items():
        stats = ("count", "p50", "p95", "min", "max")
        cells = "".join(_cell(summary, f"aggregates.{name}.{stat}", run) for stat in stats)
        rows.append(f"<tr><th>{escape(title)}</th>{cells}</tr>")
    under = (f"<p>underruns: {_span(summary, 'underruns.events', run)} "
             f"({_span(summary, 'underruns.ms', run)} ms of silence in assistant audio)</p>")
    return f"<h3>Aggregates</h3><div class='table-wrap'><table class='aggregates'>{head}{''.join(rows)}</table></div>{under}"


def _span(summary: dict[str, Any], path: str, run: int) -> str:
    return f'<span data-figure="{escape(path)}" data-run="{run}">{escape(display(path, lookup(summary, path)))}</span>'


def _transcripts(summary: dict[str, Any]) -> str:
    rows = []
    for n, b in enumerate(summary["barge_ins"]):
        full, heard = b.get("full_text"), b.get("heard_text")
        if full is None or heard is None:
            continue
        rest = full[len(heard):] if full.startswith(heard) else ""
        rows.append(f"<p class='heard-text' data-index='{n}'><b>barge-in {n + 1}</b> "
                    f"<span class='method'>(estimated by {escape(str(b.get('text_method')))})</span>: "
                    f"<span class='heard'>{escape(heard)}</span><span class='unheard'>{escape(rest)}</span></p>")
    if not rows:
        return ""
    return "<h3>What the listener heard of each cut reply</h3>" + "".join(rows)


def _checks(summary: dict[str, Any]) -> str:
    items = "".join(f"<li class='{'ok' if c['ok'] else 'fail'}'>{'✔' if c['ok'] else '✘'} {escape(c['name'])}: "
                    f"{escape(c['detail'])}</li>" for c in summary["checks"])
    return f"<h3>Checks</h3><ul class='checks'>{items}</ul>"


def _run(run: Run, n: int) -> str:
    s = run.summary
    verdict = "pass" if s["pass"] else "fail"
    title = escape(s.get("input") or f"run {n + 1}")
    return (f"<section class='run' id='run-{n}' data-run='{n}'>"
            f"<h2>{title} <span class='badge {verdict}'>{verdict}</span></h2>"
            f"<p class='meta'>{escape(s.get('mode') or '')} · {fmt_s(s.get('duration_s'))} s of listener time</p>"
            f"<div class='plot'>{run.svg}</div>"
            "<p class='legend'>Solid green: assistant audio the listener heard; dashed: received but never heard. "
            "Blue: the user's voice (light: the server VAD's segment, with padding and silence). Orange: reply "
            "latency as heard. Red: a barge-in, at the instant the listener heard silence.</p>"
            + _transcripts(s)
            + _table(s, "turns", _TURN_COLUMNS, n, "Turns")
            + _table(s, "barge_ins", _CUT_COLUMNS, n, "Barge-ins", numbered=True)
            + _aggregates(s, n) + _checks(s) + "</section>")


def _overview(runs: Sequence[Run]) -> str:
    rows = "".join(f"<tr><td><a href='#run-{n}'>{escape(r.summary.get('input') or f'run {n + 1}')}</a></td>"
                   f"<td class='{'ok' if r.summary['pass'] else 'fail'}'>{'pass' if r.summary['pass'] else 'fail'}</td>"
                   f"<td>{len(r.summary['barge_ins'])}</td><td>{len(r.summary['turns'])}</td></tr>"
                   for n, r in enumerate(runs))
    return ("<h2>Recordings</h2><div class='table-wrap'><table class='overview'><tr><th>recording</th><th>verdict</th>"
            f"<th>barge-ins</th><th>turns</th></tr>{rows}</table></div>")


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;max-width:1248px}
h1{font-size:20px;margin:0 0 8px}h2{font-size:17px;margin:18px 0 4px}h3{font-size:15px;margin:14px 0 4px}
h1,h2,p,li{overflow-wrap:anywhere}
.table-wrap{max-width:100%;overflow-x:auto}
.meta,.legend{color:#555;margin:2px 0 6px}.legend{font-size:12px}
.badge{font-size:12px;padding:1px 8px;border-radius:9px;color:#fff;vertical-align:middle}
.badge.pass,td.ok{background:#2c8a4b;color:#fff}.badge.fail,td.fail{background:#d62728;color:#fff}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
th,td{border:1px solid #ddd;padding:3px 4px;text-align:right}th{background:#f3f4f6;font-weight:600;font-size:12px}
table.barge_ins td[data-figure$='.item_id']{max-width:8em;overflow-wrap:anywhere}
td:first-child,th:first-child{text-align:left}
.heard-text{margin:4px 0}.heard-text .unheard{color:#999;text-decoration:line-through}
.method{color:#777;font-size:12px}
.checks{margin:4px 0;padding-left:18px}.checks .ok{color:#2c8a4b}.checks .fail{color:#d62728}
.plot{max-width:100%;overflow-x:auto}.plot svg{display:block;width:100%;min-width:860px;height:auto}
@media (max-width:960px){body{margin:8px}}@media (max-width:700px){.plot svg{min-width:760px}}
"""


def render_report(runs: Sequence[Run], title: str = "voxline session report") -> str:
    """The whole page for ``runs`` (one for a session, many for a replay farm)."""
    overview = _overview(runs) if len(runs) > 1 else ""
    body = "".join(_run(run, n) for n, run in enumerate(runs))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
            f"<body><h1>{escape(title)}</h1>{overview}{body}</body></html>\n")
