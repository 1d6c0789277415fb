"""``voxline replay --report/--summary``: the page's figures are the summary's, and the plot puts
every cut where it happened, read back from the HTML and its SVG (not by eye)."""

from __future__ import annotations

import contextlib
import errno
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voxline.base.errors import OutputError
from voxline.session import report as report_module
from voxline.session.metrics import BargeInRecord, MetricsReport, SpeechSegment, TurnRecord
from voxline.session.report import display, lookup, make_run, render_report
from tests.support.ci import require_tool
from tests.support.cli import EXAMPLE, voxline


class Page(HTMLParser):
    """Every element's attributes and text, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = {"tag": tag, **{k: v for k, v in attrs}, "text": "", "children": []}
        if self._open:
            self._open[-1]["children"].append(element)
        self.elements.append(element)
        if tag not in ("line", "rect", "path", "meta", "br"):
            self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = {"tag": tag, **{k: v for k, v in attrs}, "text": "", "children": []}
        if self._open:
            self._open[-1]["children"].append(element)
        self.elements.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element["text"] += data


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_tool("espeak-ng")
    tmp = tmp_path_factory.mktemp("report")
    paths = {name: tmp / name for name in ("heard.wav", "events.jsonl", "report.html", "summary.json")}
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(paths["heard.wav"]), "--events",
                  str(paths["events.jsonl"]), "--report", str(paths["report.html"]), "--summary",
                  str(paths["summary.json"]))
    assert run.returncode == 0, run.stderr
    assert "checks: pass" in run.stdout
    return {
        "html": paths["report.html"].read_text(encoding="utf-8"),
        "summary": json.loads(paths["summary.json"].read_text(encoding="utf-8")),
        "events": [json.loads(line) for line in paths["events.jsonl"].read_text().splitlines()],
    }


def test_every_figure_on_the_page_is_the_summarys(replayed: dict[str, Any]) -> None:
    summary, page = replayed["summary"], parse(replayed["html"])
    cells = {e["data-figure"]: e["text"] for e in page.elements if "data-figure" in e}
    assert len(cells) > 40
    for path, text in cells.items():
        assert text == display(path, lookup(summary, path)), path
    for n in range(len(summary["barge_ins"])):
        for field in ("audio_end_ms", "heard_ms", "received_ms", "reaction_ms", "cut_error_ms", "silent_at"):
            assert f"barge_ins.{n}.{field}" in cells
    for n in range(len(summary["turns"])):
        for field in ("reply_latency_ms", "first_delta_ms", "client_ms", "underruns"):
            assert f"turns.{n}.{field}" in cells
    for name in ("reply_latency_ms", "barge_in_reaction_ms", "cut_error_ms"):
        assert f"aggregates.{name}.p50" in cells and f"aggregates.{name}.p95" in cells


def test_the_summary_holds_each_barge_in_as_the_wire_and_the_session_saw_it(replayed: dict[str, Any]) -> None:
    summary, events = replayed["summary"], replayed["events"]
    truncates = [e["event"] for e in events if e["event"].get("type") == "conversation.item.truncate"]
    barges = [e["event"] for e in events if e["event"].get("type") == "BargeIn"]
    assert len(summary["barge_ins"]) == len(truncates) == len(barges) == 1
    (cut,), (truncate,), (barge,) = summary["barge_ins"], truncates, barges
    assert cut["audio_end_ms"] == truncate["audio_end_ms"] == barge["audio_end_ms"]
    assert cut["item_id"] == truncate["item_id"]
    assert cut["heard_ms"] == pytest.approx(barge["heard_ms"], abs=1e-4)
    assert cut["received_ms"] == pytest.approx(barge["received_ms"], abs=1e-4)
    assert [t["reply_latency_ms"] is not None for t in summary["turns"]] == [True, True]
    assert summary["pass"] and all(c["ok"] for c in summary["checks"])


def test_the_plot_marks_every_barge_in_at_the_cuts_time(replayed: dict[str, Any]) -> None:
    summary, page = replayed["summary"], parse(replayed["html"])
    (svg,) = [e for e in page.elements if e["tag"] == "svg"]
    x0, width, t0, span = (float(svg[k]) for k in ("data-x0", "data-width", "data-t0", "data-span"))
    marks = [e for e in page.elements if e["tag"] == "g" and e.get("class") == "barge-in"]
    assert len(marks) == len(summary["barge_ins"]) > 0
    for mark, cut in zip(marks, summary["barge_ins"], strict=True):
        (line,) = [c for c in mark["children"] if c["tag"] == "line"]
        expected = x0 + (cut["silent_at"] - t0) * width / span
        assert float(line["x1"]) == pytest.approx(expected, abs=0.01) and line["x1"] == line["x2"]
        label = " ".join(c["text"] for c in mark["children"] if c["tag"] == "text")  # its number, then its figures
        assert f"cut {cut['applied_ms']} ms" in label
        assert f"heard {cut['heard_ms']:.0f} / received {cut['received_ms']:.0f} ms" in label
    items = [e for e in page.elements if e["tag"] == "g" and e.get("class") == "item"]
    assert len(items) == len(summary["items"])
    speech = [e for e in page.elements if e["tag"] == "g" and e.get("class") == "speech"]
    assert [float(s["data-start"]) for s in speech] == [s["start"] for s in summary["speech"]]


def test_the_page_is_self_contained(replayed: dict[str, Any]) -> None:
    html = replayed["html"]
    assert "<script" not in html and "<link" not in html and "src=" not in html and "@import" not in html
    assert re.findall(r"https?://[^\"' )]+", html) == ["http://www.w3.org/2000/svg"]  # the SVG namespace only


def test_the_page_shows_what_the_listener_heard_of_the_cut_reply(replayed: dict[str, Any]) -> None:
    (cut,) = replayed["summary"]["barge_ins"]
    page = parse(replayed["html"])
    (shown,) = [e for e in page.elements if e.get("class") == "heard-text"]
    heard = next(c["text"] for c in shown["children"] if c.get("class") == "heard")
    unheard = next(c["text"] for c in shown["children"] if c.get("class") == "unheard")
    assert heard == cut["heard_text"] and heard + unheard == cut["full_text"]


def synthetic_report() -> MetricsReport:
    turn = TurnRecord(0, 1.0, 1.5, 1.5, 1.6, 600.0, 500.0, 100.0, 500.0, ("r1",), ("cancelled",), 0, 0.0, 2)
    cuts = tuple(BargeInRecord("server_vad", at, at + 0.005, "item_a", heard, 5000.0, int(heard), int(heard), 5.0,
                               at - 0.04, 45.0, -0.5, 0.0, 100.0) for at, heard in ((2.0, 400.25), (3.5, 1900.75)))
    return MetricsReport(9.0, (turn,), cuts, (), (SpeechSegment("u", 0.2, 1.5, 0.5, 1.0),), (), 0, 0.0)


def test_a_farm_page_gathers_every_run_with_its_verdict() -> None:
    report = synthetic_report()
    good = make_run(report, np.zeros(24000, np.int16), None, input_name="good.wav")
    bad = make_run(report, None, None, input_name="bad.wav", fatal_errors=["connection lost"])
    page = parse(render_report([good, bad]))
    rows = [e for e in page.elements if e["tag"] == "tr" and e["children"] and e["children"][0]["tag"] == "td"
            and e["children"][0]["children"] and e["children"][0]["children"][0]["tag"] == "a"]
    assert [(r["children"][0]["text"], r["children"][1]["text"]) for r in rows] == [("good.wav", "pass"),
                                                                                    ("bad.wav", "fail")]
    marks = [e for e in page.elements if e["tag"] == "g" and e.get("class") == "barge-in"]
    assert len(marks) == 4  # two per run
    for element in (e for e in page.elements if "data-figure" in e):
        summary = (good, bad)[int(element["data-run"])].summary
        assert element["text"] == display(element["data-figure"], lookup(summary, element["data-figure"]))


def test_a_cut_below_what_was_heard_fails_the_checks() -> None:
    report = synthetic_report()
    short = BargeInRecord("server_vad", 2.0, 2.005, "item_a", 400.0, 5000.0, 380, 380, 5.0, None, None, -20.0,
                          0.0, 0.0)
    run = make_run(MetricsReport(9.0, report.turns, (short,), (), (), (), 0, 0.0), None, None)
    assert not run.summary["pass"]
    assert [c["ok"] for c in run.summary["checks"]] == [False, False, True]


@pytest.mark.slow
def test_a_report_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "report.html"
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(tmp_path / "h.wav"), "--events",
                  str(tmp_path / "e.jsonl"), "--report", str(missing))
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [f"voxline replay: error: cannot write {missing}: "
                                               f"no such directory {missing.parent}"]


@pytest.mark.slow
def test_a_report_onto_a_directory_is_one_line(tmp_path: Path) -> None:
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(tmp_path / "h.wav"), "--events",
                  str(tmp_path / "e.jsonl"), "--summary", str(tmp_path))
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [f"voxline replay: error: cannot write {tmp_path}: it is a directory"]


def test_a_waveform_given_as_a_feed_plots_exactly_as_its_samples_do(tmp_path: Path) -> None:
    """The report streams long recordings into the plot; the envelope must not change for it."""
    from voxline.audio.recording import ArrayFeed, WavFeed
    from voxline.audio.wavio import write_wav
    from voxline.session.report import timeline_svg

    rng = np.random.default_rng(5)
    report = MetricsReport(9.0, (), (), (), (), (), 0, 0.0)
    for n in (1, 7, 24_000 * 3 + 11, 24_000 * 95 + 3):  # a part column, one column, many, several reads' worth
        mic = rng.integers(-32768, 32767, n, endpoint=True).astype(np.int16)
        heard = (rng.normal(0, 3000, n // 2 + 1)).astype(np.int16)
        write_wav(tmp_path / "heard.wav", heard)
        whole = timeline_svg(report, mic, heard)
        with WavFeed(tmp_path / "heard.wav") as feed:
            assert timeline_svg(report, ArrayFeed(mic), feed) == whole, n


def test_the_input_is_named_as_given_though_a_folder_looks_like_a_key_and_errors_are_still_redacted() -> None:
    """Before, the whole summary went through the key shapes: /tmp/x/sk-2024-calls/ek_intro.wav became
    /tmp/x/[redacted]/[redacted].wav, while results.jsonl and the JUnit file named it as given."""
    name = "/tmp/x/sk-2024-calls/ek_intro.wav"
    run = make_run(synthetic_report(), None, None, input_name=name, fatal_errors=["refused sk-live-0123456789abcdef"])
    assert run.summary["input"] == name
    assert "sk-live-0123456789abcdef" not in json.dumps(run.summary)


def test_a_summary_that_cannot_be_written_leaves_no_last_runs_in_its_place(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the write failed (a full disk) and the last run's passing summary stayed, to be read as this run's."""
    @contextlib.contextmanager
    def full_disk(path: Path) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")
        yield

    stale = tmp_path / "summary.json"
    stale.write_text('{"pass": true}')
    monkeypatch.setattr(report_module, "replaced", full_disk)
    with pytest.raises(OutputError, match="No space left on device"):
        report_module.write_report(make_run(synthetic_report(), None, None), summary=stale)
    assert not stale.exists()
