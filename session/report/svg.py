"""The timeline plot of a session as inline SVG: waveforms, speech, assistant items, cuts, tools.

Lanes, top to bottom, on one time axis (seconds of listener time; for a replay, input
sample ``n`` sits at ``n / 24000``): the microphone waveform with the user's speech
shaded; the user's speech as the server's VAD reported it, with each reply's latency as
heard; each assistant item (solid: heard, outlined: received but never heard); the heard
waveform; tool calls. Every barge-in is a red line at the instant the listener heard
silence, labelled with its ``audio_end_ms`` and heard/received figures.

Elements carry ``data-*`` attributes (times in seconds) so tests and tools can read the
plot back; ``x = data-x0 + (t - data-t0) * data-width / data-span``.
"""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

from ..metrics import MetricsReport

__all__ = ["HEIGHT", "LEFT", "PLOT_WIDTH", "WIDTH", "timeline_svg"]

WIDTH = 1240
LEFT = 120
PLOT_WIDTH = WIDTH - LEFT - 20
HEIGHT = 400
_LANES = {  # name → (top, height)
    "mic": (30, 84),
    "speech": (124, 34),
    "items": (168, 52),
    "heard": (230, 84),
    "tools": (324, 30),
}
_AXIS_Y = 364
_CUT_LABEL_Y = 18


class _Scale:
    def __init__(self, span: float) -> None:
        self.span = max(span, 1e-3)

    def x(self, t: float) -> float:
        return round(LEFT + min(max(t, 0.0), self.span) * PLOT_WIDTH / self.span, 2)


def _attrs(**values: Any) -> str:
    return " ".join(f'{k.replace("_", "-")}="{escape(str(v), quote=True)}"' for k, v in values.items() if v is not None)


def _envelope(samples: npt.NDArray[np.int16] | None, scale: _Scale, lane: str, css: str) -> str:
    """Min/max of the samples under each pixel column, as one path; normalised to the lane's peak."""
    top, height = _LANES[lane]
    mid = top + height / 2
    if samples is None or len(samples) == 0:
        return f'<line class="{css}" x1="{LEFT}" x2="{LEFT + PLOT_WIDTH}" y1="{mid}" y2="{mid}"/>'
    columns = max(1, int(round(min(len(samples) / SAMPLE_RATE, scale.span) * PLOT_WIDTH / scale.span)))
    usable = samples[: len(samples) // columns * columns].astype(np.float64)
    if len(usable) == 0:
        usable, columns = samples.astype(np.float64), 1
    blocks = usable.reshape(columns, -1)
    peak = max(float(np.max(np.abs(blocks))), 1.0)
    low, high = blocks.min(axis=1) / peak, blocks.max(axis=1) / peak
    step = len(blocks[0]) / SAMPLE_RATE
    parts = []
    for i in range(columns):
        x = scale.x(i * step)
        y1, y2 = mid - high[i] * height / 2, mid - low[i] * height / 2
        parts.append(f"M{x} {y1:.1f}V{max(y2, y1 + 0.5):.1f}")
    return f'<path class="{css}" d="{"".join(parts)}"/>'


def _speech(report: MetricsReport, scale: _Scale) -> list[str]:
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
        out.append(f'<g class="latency" {data}>'
                   f'<line x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>'
                   f'<text x="{(x1 + x2) / 2}" y="{top + height - 1}" text-anchor="middle">'
                   f'{turn.reply_latency_ms:.0f} ms</text></g>')
    return out


def _items(report: MetricsReport, scale: _Scale) -> list[str]:
    out = []
    top, height = _LANES["items"]
    for n, item in enumerate(report.items):
        if item.first_heard_at is None:
            continue
        start = item.first_heard_at
        heard_end, received_end = start + item.heard_ms / 1000, start + item.received_ms / 1000
        x1, x2, x3 = scale.x(start), scale.x(heard_end), scale.x(received_end)
        y = top + (5 if n % 2 == 0 else 27)
        label = f"heard {item.heard_ms / 1000:.2f} of {item.received_ms / 1000:.2f} s"
        data = _attrs(data_item=item.item_id, data_start=start, data_heard_ms=item.heard_ms,
                      data_received_ms=item.received_ms)
        out.append(f'<g class="item" {data}>'
                   f'<rect class="unheard" x="{x1}" y="{y}" width="{max(x3 - x1, 0.5)}" height="20"/>'
                   f'<rect class="heard" x="{x1}" y="{y}" width="{max(x2 - x1, 0.5)}" height="20"/>'
                   f'<text x="{x1 + 4}" y="{y + 14}">{escape(label)}</text>'
                   f'<title>assistant item {escape(item.item_id)}: heard {item.heard_ms:.1f} ms of '
                   f'{item.received_ms:.1f} ms received</title></g>')
    return out


def _barge_ins(report: MetricsReport, scale: _Scale) -> list[str]:
    out = []
    top = _CUT_LABEL_Y + 4
    bottom = _LANES["tools"][0] + _LANES["tools"][1]
    for n, b in enumerate(report.barge_ins):
        x = scale.x(b.silent_at)
        end_ms = "—" if b.applied_ms is None else f"{b.applied_ms}"
        label = f"cut {end_ms} ms · heard {b.heard_ms:.0f} / received {b.received_ms:.0f} ms"
        anchor = "end" if x > LEFT + PLOT_WIDTH * 0.6 else "start"
        dx = -4 if anchor == "end" else 4
        data = _attrs(data_index=n, data_at=b.silent_at, data_trigger_at=b.at, data_audio_end_ms=b.applied_ms,
                      data_heard_ms=b.heard_ms, data_received_ms=b.received_ms)
        out.append(f'<g class="barge-in" {data}>'
                   f'<line class="cut" x1="{x}" x2="{x}" y1="{top}" y2="{bottom}"/>'
                   f'<text class="cut-label" x="{x + dx}" y="{_CUT_LABEL_Y}" text-anchor="{anchor}">'
                   f'{escape(label)}</text>'
                   f'<title>barge-in ({escape(b.trigger)}) at {b.at:.3f} s, silent at {b.silent_at:.3f} s</title></g>')
    return out


def _tools(report: MetricsReport, scale: _Scale) -> list[str]:
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
        out.append(f'<g class="tool" {_attrs(data_call=tool.call_id, data_at=tool.requested_at)}>'
                   f'<path d="M{x0} {y - 4}l4 4-4 4-4-4z"/>'
                   f'<rect x="{x1}" y="{y - 2}" width="{max(x2 - x1, 1)}" height="4"/>'
                   f'<text x="{x0 + 7}" y="{y + 4}">{escape(tool.name)}{verdict}</text></g>')
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
.timeline .item text{fill:#fff;font-size:11px;font-weight:600}
.timeline .cut{stroke:#d62728;stroke-width:2}
.timeline .cut-label{fill:#d62728;font-weight:600}
.timeline .tool path{fill:#7b3fa0}.timeline .tool rect{fill:#7b3fa0;opacity:.5}.timeline .tool text{font-size:11px}
.timeline .axis,.timeline .tick{stroke:#888}
.timeline text.tick{stroke:none;fill:#555}
.timeline .lane{fill:#f6f7f9}
"""


def timeline_svg(report: MetricsReport, mic: npt.NDArray[np.int16] | None, heard: npt.NDArray[np.int16] | None,
                 span_s: float | None = None) -> str:
    """The plot as one ``<svg>`` element (its own ``<style>``, no external references)."""
    lengths = [len(a) / SAMPLE_RATE for a in (mic, heard) if a is not None]
    scale = _Scale(span_s if span_s is not None else max([report.at, *lengths]))
    labels = {"mic": "microphone", "speech": "user speech", "items": "assistant", "heard": "heard", "tools": "tools"}
    body = [f"<style>{_STYLE}</style>"]
    for lane, (top, height) in _LANES.items():
        body.append(f'<rect class="lane" x="{LEFT}" y="{top}" width="{PLOT_WIDTH}" height="{height}"/>'
                    f'<text class="lane-label" x="{LEFT - 8}" y="{top + height / 2 + 4}" text-anchor="end">'
                    f"{labels[lane]}</text>")
    body += _speech(report, scale)
    body.append(_envelope(mic, scale, "mic", "mic"))
    body += _items(report, scale)
    body.append(_envelope(heard, scale, "heard", "heard-wave"))
    body += _tools(report, scale)
    body += _axis(scale)
    body += _barge_ins(report, scale)
    head = _attrs(data_t0=0, data_span=scale.span, data_x0=LEFT, data_width=PLOT_WIDTH)
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="session timeline" {head}>'
            + "".join(body) + "</svg>")
