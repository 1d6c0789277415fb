"""The timeline plot of a session as inline SVG: waveforms, speech, assistant items, cuts, tools.

Lanes, top to bottom, on one time axis (seconds of listener time; for a replay, input
sample ``n`` sits at ``n / 24000``): the microphone waveform with the user's speech
shaded; the user's speech as the server's VAD reported it, with each reply's latency as
heard; each assistant item (solid: heard, outlined: received but never heard); the heard
waveform; tool calls. Every barge-in is a red line at the instant the listener heard
silence, numbered as in the barge-ins table and labelled, room permitting, with its
``audio_end_ms`` and heard/received figures.

However dense the session, no label covers another or a barge-in line, and none leaves the
plot or the bar it labels (:mod:`.layout`): a label takes the first free place among its
candidates (a shorter text, another row, the other side) or is left out, its figures still in
the element's tooltip and the tables.

Elements carry ``data-*`` attributes (times in seconds) so tests and tools can read the
plot back; ``x = data-x0 + (t - data-t0) * data-width / data-span``.
"""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.recording import SampleFeed, as_feed
from voxline.base.audio_format import SAMPLE_RATE

from ..metrics import MetricsReport
from .layout import Box, Label, Placer

__all__ = ["HEIGHT", "LEFT", "PLOT_WIDTH", "WIDTH", "Audio", "timeline_svg"]

WIDTH = 1240
LEFT = 120
PLOT_WIDTH = WIDTH - LEFT - 20
HEIGHT = 428
_LANES = {  # name → (top, height)
    "mic": (58, 84),
    "speech": (152, 34),
    "items": (196, 52),
    "heard": (258, 84),
    "tools": (352, 30),
}
_AXIS_Y = 392
_CUT_LABEL_ROWS = (14, 30, 46)  # baselines of the rows the barge-in labels take, above the lanes
_CUT_TOP = 52  # where the barge-in lines start
_READ_SAMPLES = 1 << 20  # a waveform given as a feed is read about this many samples at a time

#: a waveform: samples in memory, or a feed read front to back once (a WAV file streamed)
Audio = npt.NDArray[np.int16] | SampleFeed


class _Scale:
    def __init__(self, span: float) -> None:
        self.span = max(span, 1e-3)

    def x(self, t: float) -> float:
        return round(LEFT + min(max(t, 0.0), self.span) * PLOT_WIDTH / self.span, 2)


def _attrs(**values: Any) -> str:
    return " ".join(f'{k.replace("_", "-")}="{escape(str(v), quote=True)}"' for k, v in values.items() if v is not None)


def _frames(samples: Audio) -> int:
    return len(samples) if isinstance(samples, np.ndarray) else samples.frames


def _column_extremes(samples: Audio, columns: int, per: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The lowest and highest sample of each run of ``per`` samples, ``columns`` runs from the start.

    A feed is read about :data:`_READ_SAMPLES` at a time (an hour's recording never sits in
    memory whole); samples a feed lacks at its end count as silence."""
    feed = as_feed(samples)
    low = np.zeros(columns, dtype=np.int64)
    high = np.zeros(columns, dtype=np.int64)
    step = max(1, _READ_SAMPLES // per)
    for first in range(0, columns, step):
        k = min(step, columns - first)
        block = feed.read(k * per)
        whole = len(block) // per
        if whole:
            runs = block[: whole * per].reshape(whole, per)
            low[first : first + whole] = runs.min(axis=1)
            high[first : first + whole] = runs.max(axis=1)
        if whole < k:
            if len(block) > whole * per:  # a part run at a short feed's end: silence makes up the rest
                rest = block[whole * per :]
                low[first + whole] = min(0, int(rest.min()))
                high[first + whole] = max(0, int(rest.max()))
            break
    return low, high


def _envelope(samples: Audio | None, scale: _Scale, lane: str, css: str) -> str:
    """Min/max of the samples under each pixel column, as one path; normalised to the lane's peak."""
    top, height = _LANES[lane]
    mid = top + height / 2
    n = 0 if samples is None else _frames(samples)
    if samples is None or n == 0:
        return f'<line class="{css}" x1="{LEFT}" x2="{LEFT + PLOT_WIDTH}" y1="{mid}" y2="{mid}"/>'
    columns = max(1, int(round(min(n / SAMPLE_RATE, scale.span) * PLOT_WIDTH / scale.span)))
    per = n // columns
    if per == 0:
        columns, per = 1, n
    low, high = _column_extremes(samples, columns, per)
    peak = float(max(-int(low.min()), int(high.max()), 1))
    lows, highs = low / peak, high / peak
    step = per / SAMPLE_RATE
    parts = []
    for i in range(columns):
        x = scale.x(i * step)
        y1, y2 = mid - highs[i] * height / 2, mid - lows[i] * height / 2
        parts.append(f"M{x} {y1:.1f}V{max(y2, y1 + 0.5):.1f}")
    return f'<path class="{css}" d="{"".join(parts)}"/>'


def _speech(report: MetricsReport, scale: _Scale, placer: Placer) -> list[str]:
    out = []
    mic_top, mic_h = _LANES["mic"]
    top, height = _LANES["speech"]
    for seg in report.speech:
        end = seg.end if seg.end is not None else report.at
        core_end = seg.speech_end if seg.speech_end is not None else end
        x1, x2 = scale.x(seg.start), scale.x(end)
        c1, c2 = scale.x(seg.speech_start), scale.x(core_end)
        out.append(f'<rect class="speech-shade" x="{c1}" y="{mic_top}" width="{max(c2 - c1, 0.5)}" height="{mic_h}"/>')
        out.append(f'<g class="speech" {_attrs(data_start=seg.start, data_end=seg.end, data_source=seg.source)}>'
                   f'<rect class="vad" x="{x1}" y="{top + 4}" width="{max(x2 - x1, 0.5)}" height="{height - 8}"/>'
                   f'<rect class="voice" x="{c1}" y="{top + 8}" width="{max(c2 - c1, 0.5)}" height="{height - 16}"/>'
                   f'<title>user speech {seg.start:.3f}–{end:.3f} s (server VAD); voice '
                   f'{seg.speech_start:.3f}–{core_end:.3f} s</title></g>')
    for turn in report.turns:
        if turn.reply_latency_ms is None or turn.speech_end_at is None or turn.first_heard_at is None:
            continue
        x1, x2 = scale.x(turn.speech_end_at), scale.x(turn.first_heard_at)
        y = top + height / 2
        data = _attrs(data_turn=turn.index, data_start=turn.speech_end_at, data_end=turn.first_heard_at)
        text, base = f"{turn.reply_latency_ms:.0f} ms", top + height - 2
        label = placer.place([Label(text, (x1 + x2) / 2, base, "middle", 11), Label(text, x2 + 3, base, "start", 11),
                              Label(text, x1 - 3, base, "end", 11)])
        out.append(f'<g class="latency" {data}>'
                   f'<line x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>' + _text(label)
                   + f'<title>reply latency as heard, turn {turn.index + 1}: {text}</title></g>')
    return out


def _items(report: MetricsReport, scale: _Scale, placer: Placer) -> list[str]:
    out = []
    top, height = _LANES["items"]
    for n, item in enumerate(report.items):
        if item.first_heard_at is None:
            continue
        start = item.first_heard_at
        heard_end, received_end = start + item.heard_ms / 1000, start + item.received_ms / 1000
        x1, x2, x3 = scale.x(start), scale.x(heard_end), scale.x(received_end)
        y = top + (5 if n % 2 == 0 else 27)
        text = f"heard {item.heard_ms / 1000:.2f} of {item.received_ms / 1000:.2f} s"
        short = f"{item.heard_ms / 1000:.2f} s"
        base = y + 14
        label = placer.place([Label(text, x1 + 4, base, size=11, bold=True, within=(x1, x2 - 2)),
                              Label(short, x1 + 4, base, size=11, bold=True, within=(x1, x2 - 2)),
                              Label(text, x3 + 4, base, size=11, bold=True)])
        outside = label is not None and label.within is None
        data = _attrs(data_item=item.item_id, data_start=start, data_heard_ms=item.heard_ms,
                      data_received_ms=item.received_ms)
        out.append(f'<g class="item" {data}>'
                   f'<rect class="unheard" x="{x1}" y="{y}" width="{max(x3 - x1, 0.5)}" height="20"/>'
                   f'<rect class="heard" x="{x1}" y="{y}" width="{max(x2 - x1, 0.5)}" height="20"/>'
                   + _text(label, "outside" if outside else None) +
                   f'<title>assistant item {escape(item.item_id)}: heard {item.heard_ms:.1f} ms of '
                   f'{item.received_ms:.1f} ms received</title></g>')
    return out


def _cut_lines(report: MetricsReport, scale: _Scale, placer: Placer) -> None:
    """Every barge-in line, blocked before any label is placed."""
    bottom = _LANES["tools"][0] + _LANES["tools"][1]
    for b in report.barge_ins:
        x = scale.x(b.silent_at)
        placer.block(Box(x - 1, _CUT_TOP, x + 1, bottom))


def _barge_ins(report: MetricsReport, scale: _Scale, placer: Placer) -> list[str]:
    """Each line with its number (placed for every barge-in first), then its figures where they fit."""
    bottom = _LANES["tools"][0] + _LANES["tools"][1]
    xs = [scale.x(b.silent_at) for b in report.barge_ins]
    numbers = [placer.place([Label(f"{n + 1}", x + dx, y, anchor, 12, True) for y in _CUT_LABEL_ROWS
                             for anchor, dx in (("start", 4), ("end", -4))]) for n, x in enumerate(xs)]
    out = []
    for n, (b, x, number) in enumerate(zip(report.barge_ins, xs, numbers, strict=True)):
        end_ms = "—" if b.applied_ms is None else f"{b.applied_ms}"
        figures = f"cut {end_ms} ms · heard {b.heard_ms:.0f} / received {b.received_ms:.0f} ms"
        detail = None
        if number is not None:  # beside its number, else on another row with the number again
            box, candidates = number.box, []
            for text in (figures, f"cut {end_ms} ms"):
                beside = [Label(f"· {text}", box.x2 + 4, number.y, "start", 12, True),
                          Label(f"{text} ·", box.x1 - 4, number.y, "end", 12, True)]
                candidates += beside if number.anchor == "start" else beside[::-1]
                candidates += [Label(f"{n + 1}: {text}", x + dx, y, anchor, 12, True) for y in _CUT_LABEL_ROWS
                               if y != number.y for anchor, dx in (("start", 4), ("end", -4))]
            detail = placer.place(candidates)
            if detail is not None and detail.text.startswith(f"{n + 1}: "):
                number = None  # the figures on another row carry the number
        data = _attrs(data_index=n, data_at=b.silent_at, data_trigger_at=b.at, data_audio_end_ms=b.applied_ms,
                      data_heard_ms=b.heard_ms, data_received_ms=b.received_ms)
        out.append(f'<g class="barge-in" {data}>'
                   f'<line class="cut" x1="{x}" x2="{x}" y1="{_CUT_TOP}" y2="{bottom}"/>'
                   + _text(number, "cut-label") + _text(detail, "cut-label") +
                   f'<title>barge-in {n + 1} ({escape(b.trigger)}) at {b.at:.3f} s, silent at {b.silent_at:.3f} s: '
                   f'{escape(figures)}</title></g>')
    return out


def _text(label: Label | None, css: str | None = None) -> str:
    """A placed label as a ``<text>``; nothing for a label left out."""
    if label is None:
        return ""
    kind = f' class="{css}"' if css else ""
    return (f'<text{kind} x="{round(label.x, 2)}" y="{label.y}" text-anchor="{label.anchor}">'
            f"{escape(label.text)}</text>")


def _tools(report: MetricsReport, scale: _Scale, placer: Placer) -> list[str]:
    out = []
    top, height = _LANES["tools"]
    last_x, row = -1e9, 0
    for tool in report.tools:
        start = tool.started_at if tool.started_at is not None else tool.requested_at
        end = tool.finished_at if tool.finished_at is not None else start
        x0, x1, x2 = scale.x(tool.requested_at), scale.x(start), scale.x(end)
        row = (row + 1) % 2 if x0 - last_x < 140 else 0  # calls close together take turns on two rows
        last_x = x0
        y = top + 8 + row * 14
        verdict = "" if tool.ok is None else (" ok" if tool.ok else " failed")
        text = f"{tool.name}{verdict}"
        label = placer.place([Label(text, x0 + 7, y + 4, size=11), Label(text, x0 + 7, top + 8 + (1 - row) * 14 + 4,
                                                                         size=11)])
        out.append(f'<g class="tool" {_attrs(data_call=tool.call_id, data_at=tool.requested_at)}>'
                   f'<path d="M{x0} {y - 4}l4 4-4 4-4-4z"/>'
                   f'<rect x="{x1}" y="{y - 2}" width="{max(x2 - x1, 1)}" height="4"/>'
                   + _text(label) + f'<title>tool {escape(text)} at {tool.requested_at:.3f} s</title></g>')
    return out


def _axis(scale: _Scale) -> list[str]:
    step = next(s for s in (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1e9) if scale.span / s <= 16)
    out = [f'<line class="axis" x1="{LEFT}" x2="{LEFT + PLOT_WIDTH}" y1="{_AXIS_Y}" y2="{_AXIS_Y}"/>']
    t = 0.0
    while t <= scale.span + 1e-9:
        x = scale.x(t)
        out.append(f'<line class="tick" x1="{x}" x2="{x}" y1="{_AXIS_Y}" y2="{_AXIS_Y + 5}"/>'
                   f'<text class="tick" x="{x}" y="{_AXIS_Y + 18}" text-anchor="middle">{t:g} s</text>')
        t += step
    return out


_STYLE = """
.timeline text{font:12px system-ui,sans-serif;fill:#222}
.timeline .lane-label{font-weight:600;fill:#444}
.timeline .mic{stroke:#3a6ea5;stroke-width:1;fill:none}
.timeline .heard-wave{stroke:#2c8a4b;stroke-width:1;fill:none}
.timeline .speech-shade{fill:#3a6ea5;opacity:.12}
.timeline .vad{fill:#c9dbf0}
.timeline .voice{fill:#3a6ea5}
.timeline .latency line{stroke:#b36b00;stroke-width:2}
.timeline .latency text{fill:#b36b00;font-size:11px}
.timeline .item .heard{fill:#2c8a4b}
.timeline .item .unheard{fill:none;stroke:#2c8a4b;stroke-dasharray:3 2}
.timeline .item text{fill:#fff;font-size:11px;font-weight:600}.timeline .item text.outside{fill:#1d5c32}
.timeline .cut{stroke:#d62728;stroke-width:2}
.timeline .cut-label{fill:#d62728;font-weight:600}
.timeline .tool path{fill:#7b3fa0}.timeline .tool rect{fill:#7b3fa0;opacity:.5}.timeline .tool text{font-size:11px}
.timeline .axis,.timeline .tick{stroke:#888}
.timeline text.tick{stroke:none;fill:#555}
.timeline .lane{fill:#f6f7f9}
"""


def timeline_svg(report: MetricsReport, mic: Audio | None, heard: Audio | None, span_s: float | None = None) -> str:
    """The plot as one ``<svg>`` element (its own ``<style>``, no external references); a waveform given
    as a feed is read once, front to back."""
    lengths = [_frames(a) / SAMPLE_RATE for a in (mic, heard) if a is not None]
    scale = _Scale(span_s if span_s is not None else max([report.at, *lengths]))
    labels = {"mic": "microphone", "speech": "user speech", "items": "assistant", "heard": "heard", "tools": "tools"}
    body = [f"<style>{_STYLE}</style>"]
    for lane, (top, height) in _LANES.items():
        body.append(f'<rect class="lane" x="{LEFT}" y="{top}" width="{PLOT_WIDTH}" height="{height}"/>'
                    f'<text class="lane-label" x="{LEFT - 8}" y="{top + height / 2 + 4}" text-anchor="end">'
                    f"{labels[lane]}</text>")
    placer = Placer(LEFT, LEFT + PLOT_WIDTH)
    _cut_lines(report, scale, placer)
    cuts = _barge_ins(report, scale, placer)  # their labels first: they sit in a band of their own
    body += _speech(report, scale, placer)
    body.append(_envelope(mic, scale, "mic", "mic"))
    body += _items(report, scale, placer)
    body.append(_envelope(heard, scale, "heard", "heard-wave"))
    body += _tools(report, scale, placer)
    body += _axis(scale)
    body += cuts
    head = _attrs(data_t0=0, data_span=scale.span, data_x0=LEFT, data_width=PLOT_WIDTH)
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="session timeline" {head}>'
            + "".join(body) + "</svg>")
