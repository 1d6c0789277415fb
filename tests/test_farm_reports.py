"""A farm recording's report says what the farm said of it.

``--farm-report`` wrote ``summary.json`` with ``"pass": true`` (and a report page to match) for a
recording the farm judged FAIL: its checks were the cut and fatal errors only, not the manifest's
expectations.
"""

from __future__ import annotations

import json
from pathlib import Path

from voxline.session.replay.farm import FarmRecording
from voxline.session.replay.farm.runner import FarmOptions, run_part
from voxline.session.settings import SessionSettings
from tests.support.farm import make_recording


def test_a_recording_the_farm_fails_fails_in_its_summary_and_report(tmp_path: Path) -> None:
    make_recording(tmp_path / "a.wav", 0, True)
    recordings = [FarmRecording(name="held", path=tmp_path / "a.wav", folder="held", expect={"barge_ins": 1}),
                  FarmRecording(name="missed", path=tmp_path / "a.wav", folder="missed", expect={"barge_ins": 5})]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, jobs=2, voice="tone",
                          report=True)
    rows = run_part([r.model_dump(mode="json") for r in recordings], options)
    assert [(r["name"], r["status"]) for r in rows] == [("held", "pass"), ("missed", "fail")], rows
    held = json.loads((tmp_path / "out" / "held" / "summary.json").read_text())
    missed = json.loads((tmp_path / "out" / "missed" / "summary.json").read_text())
    assert held["pass"] is True and missed["pass"] is False
    [failed] = [c for c in missed["checks"] if not c["ok"]]
    assert failed == {"name": "expected barge_ins 5", "ok": False, "detail": "measured 1"}
    assert "expected barge_ins 5" in (tmp_path / "out" / "missed" / "report.html").read_text()


def test_a_run_without_reports_leaves_no_last_runs_report_beside_its_audio(tmp_path: Path) -> None:
    make_recording(tmp_path / "a.wav", 0, True)
    recordings = [FarmRecording(name="a", path=tmp_path / "a.wav", folder="a").model_dump(mode="json")]
    folder = tmp_path / "out" / "a"
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, voice="tone", report=True,
                          stereo=True)
    run_part(recordings, options)
    assert {p.name for p in folder.iterdir()} == {"heard.wav", "events.jsonl", "summary.json", "report.html",
                                                  "stereo.wav"}
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, voice="tone")
    [row] = run_part(recordings, options)
    assert row["status"] == "pass", row
    assert {p.name for p in folder.iterdir()} == {"heard.wav", "events.jsonl"}


def test_a_results_line_keeps_the_path_of_every_file_its_recording_wrote(tmp_path: Path) -> None:
    """results.jsonl named heard.wav and events.jsonl only, though summary.json, report.html and stereo.wav were
    written beside them: a CI job had to guess where a recording's report was."""
    make_recording(tmp_path / "a.wav", 0, True)
    recordings = [FarmRecording(name="a", path=tmp_path / "a.wav", folder="a").model_dump(mode="json")]
    folder = tmp_path / "out" / "a"
    [row] = run_part(recordings, FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True,
                                             voice="tone", report=True, stereo=True))
    paths = {key: row[key] for key in ("heard", "events", "summary", "report", "stereo")}
    assert paths == {"heard": str(folder / "heard.wav"), "events": str(folder / "events.jsonl"),
                     "summary": str(folder / "summary.json"), "report": str(folder / "report.html"),
                     "stereo": str(folder / "stereo.wav")}
    assert all(Path(p).is_file() for p in paths.values())
    [row] = run_part(recordings, FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True,
                                             voice="tone", stereo=True))
    assert (row["summary"], row["report"], row["stereo"]) == (None, None, str(folder / "stereo.wav"))


def test_a_recording_that_errors_keeps_no_last_runs_passing_summary(tmp_path: Path) -> None:
    """The recording was cut short since the last run: its verdict is an error, and its folder held the last
    run's summary.json ("pass": true), report and stereo file beside it, for a CI job collecting */summary.json."""
    make_recording(tmp_path / "a.wav", 0, True)
    recordings = [FarmRecording(name="a", path=tmp_path / "a.wav", folder="a").model_dump(mode="json")]
    folder = tmp_path / "out" / "a"
    run_part(recordings, FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, voice="tone",
                                     report=True, stereo=True))
    assert json.loads((folder / "summary.json").read_text())["pass"] is True
    (tmp_path / "a.wav").write_bytes((tmp_path / "a.wav").read_bytes()[:30])  # not a WAV any more
    [row] = run_part(recordings, FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True,
                                             voice="tone", report=True, stereo=True))
    assert row["status"] == "error" and row["heard"] is None, row
    assert not {"summary.json", "report.html", "stereo.wav"} & {p.name for p in folder.iterdir()}


def test_a_recording_a_stop_kept_from_running_keeps_no_last_runs_passing_summary(tmp_path: Path) -> None:
    """A CI job killed by its timeout: the recordings it had not reached got an error verdict beside the last
    run's summary.json saying pass (and a recording stopped part way had its summary judged on that part)."""
    import asyncio

    from voxline.base.clock import VirtualClock
    from voxline.session.lockstep import LockstepLoop
    from voxline.session.replay.farm.runner import run_farm

    make_recording(tmp_path / "a.wav", 0, True)
    recording = FarmRecording(name="a", path=tmp_path / "a.wav", folder="a")
    folder = tmp_path / "out" / "a"
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, voice="tone",
                          report=True, stereo=True)
    run_part([recording.model_dump(mode="json")], options)
    assert json.loads((folder / "summary.json").read_text())["pass"] is True

    async def stopped() -> list[object]:
        stop = asyncio.Event()
        stop.set()
        return list(await run_farm([recording], options, stop))

    runner = asyncio.Runner(loop_factory=lambda: LockstepLoop(VirtualClock()))
    with runner:
        [outcome] = runner.run(stopped())
    assert outcome.status == "error" and outcome.error == "interrupted before it started"  # type: ignore[attr-defined]
    assert not {"summary.json", "report.html", "stereo.wav"} & {p.name for p in folder.iterdir()}
