"""The HTML report read at any density and width, in a real browser: headless Chromium lays out the
page and the test reads back every label's box.

For two barge-ins 1.5 s apart, ten in a minute and 150 over a 30-minute recording, at 1280, 900 and
400 px: no label box overlaps another or a barge-in line, none leaves the plot, the page never
scrolls sideways (the plot and the tables scroll in their own boxes), and at 900 px the barge-ins
table fits without scrolling. A label left out for want of room must be the exception, not the way
the test passes: the sparse cases label every barge-in in full.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from tests.support.browser import launch
from tests.support.report_layout import CASES, WIDTHS, layout, overlaps, write_case

pytestmark = pytest.mark.slow  # a browser per test


@pytest.mark.parametrize("name", list(CASES))
async def test_labels_never_overlap_or_leave_the_plot_at_any_width(tmp_path: Path, name: str) -> None:
    html = write_case(name, tmp_path)
    async with launch() as browser:
        page = await browser.new_page()
        for width in WIDTHS:
            seen = await layout(page, html.as_uri(), width, tmp_path / f"{name}-{width}px.png")
            where = f"{name} at {width} px"
            texts = seen["texts"]
            for a, b in combinations(texts, 2):
                assert not overlaps(a["box"], b["box"]), f"{where}: {a['text']!r} overlaps {b['text']!r}"
            for cut in seen["cuts"]:
                line = cut["line"]
                for t in texts:
                    box = t["box"]
                    crosses = box[0] + 0.5 < line[0] < box[2] - 0.5 and box[1] < line[3] and line[1] < box[3]
                    assert not crosses, f"{where}: {t['text']!r} lies on a barge-in line"
            left, top, right, bottom = seen["svg"]
            for t in texts:
                box = t["box"]
                assert left - 0.5 <= box[0] and box[2] <= right + 0.5 and top <= box[1] and box[3] <= bottom + 0.5, \
                    f"{where}: {t['text']!r} leaves the plot"
            assert seen["page"]["scroll"] <= seen["page"]["inner"], f"{where}: the page scrolls sideways"
            if width >= 900:
                cuts_table = [t for t in seen["tables"] if t["table"] == "barge_ins"]
                assert cuts_table and all(t["scroll"] <= t["client"] for t in cuts_table), f"{where}: {cuts_table}"
            assert (tmp_path / f"{name}-{width}px.png").stat().st_size > 10_000
            labelled = [c["labelled"] for c in seen["cuts"]]
            if name != "thirty-minutes":
                assert all(labelled), f"{where}: a barge-in left without its label"
            else:
                assert sum(labelled) >= len(labelled) // 3, f"{where}: {sum(labelled)} of {len(labelled)} labelled"


async def test_sparse_barge_ins_keep_their_full_labels(tmp_path: Path) -> None:
    html = write_case("two-barge-ins-1.5s-apart", tmp_path)
    async with launch() as browser:
        page = await browser.new_page()
        seen = await layout(page, html.as_uri(), 1280)
    cut_labels = [t["text"] for t in seen["texts"] if t["cls"] == "cut-label"]
    for n in (1, 2):  # each numbered, beside its figures or with them on another row
        assert any(label == str(n) or label.startswith(f"{n}: cut ") for label in cut_labels), cut_labels
    assert sum(" · heard " in label for label in cut_labels) == 2, cut_labels  # both with all their figures
    # the reply heard 1.71 s of 6.90: its label stays on its bar, shortened if the whole does not fit
    assert any(t["text"] in ("heard 1.71 of 6.90 s", "1.71 s") for t in seen["texts"])
