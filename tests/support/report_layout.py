"""Dense session reports and how Chromium lays them out: for the layout tests and the screenshots in docs/.

:func:`dense_report` makes a :class:`MetricsReport` with a barge-in every ``period`` seconds (each
cutting a 6.9 s reply after what fits), the turns' latencies and a tool call now and then;
:data:`CASES` are the densities the tests render. :func:`layout` opens a page at one window width
and returns every label's box, every barge-in line, the tables' and the page's widths.

``python -m tests.support.report_layout docs/report-layout`` writes the screenshots kept in the
repository (the tests write theirs in a temporary folder).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from voxline.base.audio_format import SAMPLE_RATE
from voxline.session.metrics.records import (BargeInRecord, ItemRecord, MetricsReport, SpeechSegment, ToolRecord,
                                             TurnRecord)
from voxline.session.report import make_run, render_report

__all__ = ["CASES", "WIDTHS", "dense_report", "layout", "overlaps", "write_case"]

WIDTHS = (1280, 900, 400)


def dense_report(span_s: float, cuts: list[float], *, first_reply_at: float = 1.8, tool_every: int = 0) -> MetricsReport:
    """Barge-ins at the ``cuts`` instants (the listener hears silence there), each on a reply that began
    after the one before; a last reply heard whole."""
    turns, barge_ins, items, speech, tools = [], [], [], [], []
    reply_at = first_reply_at
    for k, silent in enumerate([*cuts, None]):
        speech_end = reply_at - 0.6
        speech.append(SpeechSegment(f"user{k}", speech_end - 1.1, speech_end + 0.2, speech_end - 0.9, speech_end))
        heard_ms = 6900.0 if silent is None else (silent - reply_at) * 1000
        items.append(ItemRecord(f"item_{k:04}", 0, f"resp{k}", reply_at - 0.1, reply_at, heard_ms, 6900.0,
                                cut=silent is not None))
        turns.append(TurnRecord(k, speech_end, speech_end + 0.2, reply_at - 0.1, reply_at, 600.0, 500.0, 100.0, 200.0,
                                (f"resp{k}",), ("cancelled" if silent is not None else "completed",), 0, 0.0,
                                int(silent is not None)))
        if tool_every and k % tool_every == 0:
            tools.append(ToolRecord(f"call{k}", "lookup_order", reply_at - 0.4, reply_at - 0.38, reply_at - 0.2, True))
        if silent is None:
            break
        barge_ins.append(BargeInRecord("server_vad", silent - 0.005, silent, f"item_{k:04}", heard_ms, 6900.0,
                                       int(heard_ms), int(heard_ms), 5.0, silent - 0.3, 300.0, -0.4, 0.0, 100.0))
        reply_at = silent + 0.9  # the user's interruption is answered
        if reply_at > span_s - 1:
            break
    return MetricsReport(span_s, tuple(turns), tuple(barge_ins), tuple(items), tuple(speech), tuple(tools), 0, 0.0)


CASES: dict[str, MetricsReport] = {
    # a reply cut after 1.71 of 6.90 s, the answer to the interruption cut 1.5 s later
    "two-barge-ins-1.5s-apart": dense_report(12.0, [3.51, 5.01]),
    "ten-in-a-minute": dense_report(60.0, [3.5 + 5.6 * k for k in range(10)], tool_every=3),
    "thirty-minutes": dense_report(1800.0, [4.0 + 11.9 * k for k in range(150)], tool_every=4),
}


def write_case(name: str, folder: Path) -> Path:
    """The case's REPORT.html (with a generated microphone and heard waveform) in ``folder``."""
    report = CASES[name]
    n = int(report.at * SAMPLE_RATE)
    mic, heard = np.zeros(n, np.int16), np.zeros(n, np.int16)
    voice = lambda k: (np.sin(np.arange(k) * 0.07) * np.hanning(k) * 12000).astype(np.int16)  # noqa: E731
    for seg in report.speech:
        a, b = int(seg.speech_start * SAMPLE_RATE), int((seg.speech_end or seg.start) * SAMPLE_RATE)
        mic[a:b] = voice(len(mic[a:b]))
    for item in report.items:
        if item.first_heard_at is not None:
            a = int(item.first_heard_at * SAMPLE_RATE)
            b = a + int(item.heard_ms * SAMPLE_RATE / 1000)
            heard[a:b] = voice(len(heard[a:b]))
    run = make_run(report, mic, heard, input_name=f"calls/{name}.wav", mode="lockstep, virtual clock",
                   duration_s=report.at)
    path = folder / f"{name}.html"
    path.write_text(render_report([run]), encoding="utf-8")
    return path


_MEASURE = """(() => {
  const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const svg = document.querySelector('svg.timeline');
  return {
    texts: [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
             .map(t => ({text: t.textContent, cls: t.getAttribute('class') || '', box: box(t)})),
    cuts: [...svg.querySelectorAll('g.barge-in')].map(g => ({line: box(g.querySelector('line')),
             labelled: g.querySelector('text') !== null})),
    svg: box(svg),
    tables: [...document.querySelectorAll('.table-wrap')].map(w => ({table: w.firstElementChild.className,
             scroll: w.scrollWidth, client: w.clientWidth})),
    page: {scroll: document.documentElement.scrollWidth, inner: window.innerWidth},
  };
})()"""


async def layout(page: Any, url: str, width: int, screenshot: Path | None = None) -> dict[str, Any]:
    """The page at ``url`` laid out in a window ``width`` px wide (a browser :class:`Page`)."""
    await page.send("Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    await page.goto(url)
    measured: dict[str, Any] = await page.evaluate(_MEASURE)
    if screenshot is not None:
        await page.screenshot(screenshot)  # the window: the header, the plot and the first tables
    return measured


def overlaps(a: list[float], b: list[float], tolerance: float = 0.5) -> bool:
    """Whether two boxes ``[left, top, right, bottom]`` share more than ``tolerance`` px each way."""
    return min(a[2], b[2]) - max(a[0], b[0]) > tolerance and min(a[3], b[3]) - max(a[1], b[1]) > tolerance


async def _screens(folder: Path) -> None:
    from tests.support.browser import launch

    with tempfile.TemporaryDirectory() as tmp:
        async with launch() as browser:
            page = await browser.new_page()
            for name in CASES:
                html = write_case(name, Path(tmp))
                for width in WIDTHS:
                    await layout(page, html.as_uri(), width, folder / f"{name}-{width}px.png")


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "docs/report-layout")
    folder.mkdir(parents=True, exist_ok=True)
    asyncio.run(_screens(folder))
    print(f"screenshots written to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
