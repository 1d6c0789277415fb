"""Replay farms: many recordings in one command, judged, reported as JSON lines and JUnit XML.

The cores (manifest, sharding, judging, JUnit) are tested on plain data; the command runs
as a user runs it, the installed ``voxline`` on a farm of 52 generated recordings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import read_wav
from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay import replay_fast
from voxline.session.replay.farm import (
    Check,
    Expectations,
    Outcome,
    Range,
    Shard,
    deal,
    junit_xml,
    load_manifest,
    parse_shard,
    recordings_from_paths,
)
from voxline.session.replay.farm.layout import assign_folders
from voxline.session.replay.farm.results import Measured, judge, outcome
from tests.support.cli import one_line_error
from tests.support.farm import make_recording

ROOT = Path(__file__).resolve().parent.parent
VOXLINE = Path(sys.executable).parent / "voxline"


def voxline(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    return subprocess.run([str(VOXLINE), *args], cwd=cwd, capture_output=True, text=True, timeout=180, env=clean)


# the manifest's pieces, on plain data

def write_manifest(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def test_a_manifest_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    make_recording(tmp_path / "a.wav", 1, False)
    (tmp_path / "farm.toml").write_bytes('\ufeff[[recording]]\npath = "a.wav"\n'.encode())
    (recording,) = load_manifest(tmp_path / "farm.toml")
    assert recording.name == "a"


def test_a_recording_path_that_is_there_but_no_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    """A pipe given by name was 'no such file or directory', and so was a loop of links: the pipe is now a recording
    whose reading says what it is (an error verdict, the others run), the loop a loop."""
    make_recording(tmp_path / "a.wav", 1, False)
    os.mkfifo(tmp_path / "pipe.wav")
    (tmp_path / "loop.wav").symlink_to("loop.wav")
    assert [r.name for r in recordings_from_paths([tmp_path / "a.wav", tmp_path / "pipe.wav"])] == ["a", "pipe"]
    with pytest.raises(ConfigurationError, match="loop.wav: too many levels of symbolic links"):
        recordings_from_paths([tmp_path / "a.wav", tmp_path / "loop.wav"])
    for target, said in (("pipe.wav", None), ("loop.wav", "path: too many levels of symbolic links: ")):
        (tmp_path / "farm.toml").write_text(f'[[recording]]\npath = "{target}"\n')
        if said is None:
            assert [r.name for r in load_manifest(tmp_path / "farm.toml")] == ["pipe"]
        else:
            with pytest.raises(ConfigurationError, match=said):
                load_manifest(tmp_path / "farm.toml")


def test_a_manifest_resolves_paths_defaults_and_sidecars(tmp_path: Path) -> None:
    make_recording(tmp_path / "b.wav", 1, True)
    make_recording(tmp_path / "a.wav", 2, False)
    (tmp_path / "a.txt").write_text("hello there\n")
    manifest = write_manifest(tmp_path / "farm.toml", """
[defaults]
scenario = "long"
expect = { no_errors = true, max_cut_error_ms = 5 }

[[recording]]
path = "b.wav"
name = "bee"
expect = { barge_ins = { min = 1, max = 2 }, max_cut_error_ms = 10 }

[[recording]]
path = "a.wav"
scenario = "default"
""")
    a, bee = load_manifest(manifest)  # sorted by name
    assert (a.name, a.scenario, a.transcripts, a.path) == ("a", "default", ("hello there",), (tmp_path / "a.wav").resolve())
    assert a.expect == Expectations(no_errors=True, max_cut_error_ms=5)
    assert bee.scenario == "long" and bee.transcripts is None
    assert bee.expect.max_cut_error_ms == 10 and bee.expect.no_errors and str(bee.expect.barge_ins) == "1..2"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[[recording]]\npath = "r.wav"\nexpect = { barge_in = 1 }\n', "recording 1: expect.barge_in: not a field of this table"),
        ('[[recording]]\npath = "r.wav"\n[[recording]]\npath = "r.wav"\nexpect = { max_cut_error_ms = -1 }\n',
         "recording 2: expect.max_cut_error_ms: takes a number >= 0"),
        ('[[recording]]\npath = "r.wav"\nexpect = { barge_ins = { min = 3, max = 1 } }\n',
         "recording 1: expect.barge_ins: min 3 is above max 1"),
        ('[[recording]]\npath = "r.wav"\nname = "red\\u001b[31m"\n',  # it turned the terminal of pytest's summary red
         "recording 1: name: 'red\\x1b[31m' cannot name a recording: give a name of printable characters"),
        ('[[recording]]\npath = "r.wav"\nname = "../up"\n', "recording 1: name: '../up' cannot name a recording: give a name "
                                                          "with no '/', '\\' or NUL, not empty"),
        ('[[recording]]\nname = "x"\n', "recording 1: path: missing (it is required)"),
        ("recording = []\n", ": no recording listed: add a [[recording]] table with its path"),
        ('[recording]\npath = "r.wav"\n', ": recording: write each recording as a [[recording]] table (double brackets)"),
        ('[[recording]]\npath = "r.wav"\nname = 5\n', "recording 1: name: takes text"),
        ('[[recording]]\npath = "r.wav"\nexpect = { max_reply_latency_ms = "fast" }\n',
         "recording 1: expect.max_reply_latency_ms: takes a number"),
        ('[[recording]]\npath = "r.wav"\nexpect = { no_errors = "yes" }\n',  # TOML has booleans: text is no yes
         "recording 1: expect.no_errors: takes true or false"),
        ('[[recording]]\npath = "r.wav"\nexpect = { no_errors = 1 }\n', "recording 1: expect.no_errors: takes true or false"),
        ('[[recording]]\npath = "r.wav"\nexpect = { max_cut_error_ms = "30" }\n',
         "recording 1: expect.max_cut_error_ms: takes a number"),
        ('[[recording]]\npath = "r.wav"\nexpect = { barge_ins = 1.0 }\n', "recording 1: expect.barge_ins: takes a whole number"),
        ('[[recording]]\npath = "r.wav"\nexpect = { barge_ins = { min = "1" } }\n',
         "recording 1: expect.barge_ins.min: takes a whole number"),
        ('[[recording]]\npath = "missing.wav"\n', "recording 1: path: no such file"),
        ('[[recording]]\npath = "adir"\n', "recording 1: path: a directory, not a WAV file"),
        ('[[recording]]\npath = "r.wav"\n[[recording]]\npath = "r.wav"\n', "two recordings are named 'r'"),
        ("[defaults]\n", ": no recording listed: add a [[recording]] table with its path"),
        ('[[recordings]]\npath = "r.wav"\n', "recordings: not a table of a manifest (did you mean [[recording]]?)"),
        ("[[recording]\n", "is not valid TOML"),
    ],
)
def test_a_bad_manifest_is_one_line_naming_the_file_and_field(tmp_path: Path, body: str, expected: str) -> None:
    make_recording(tmp_path / "r.wav", 1, False)
    (tmp_path / "adir").mkdir()
    manifest = write_manifest(tmp_path / "farm.toml", body)
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(manifest)
    message = str(caught.value)
    assert str(manifest) in message and expected in message and "\n" not in message
    assert not any(words in message for words in ("Value error", "Field required", "pattern", "Input should", "Extra "
                                                  "inputs", "unable to parse"))


def test_a_directory_is_its_sorted_wavs(tmp_path: Path) -> None:
    for name in ("c", "a", "b"):
        make_recording(tmp_path / f"{name}.wav", 1, False)
    (tmp_path / "notes.txt").write_text("not a recording")
    assert [r.name for r in recordings_from_paths([tmp_path])] == ["a", "b", "c"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="no \\*.wav recordings"):
        recordings_from_paths([tmp_path / "empty"])


def test_one_recording_given_twice_is_a_usage_error_and_two_of_one_name_are_told_apart(tmp_path: Path) -> None:
    """``a/same.wav b/same.wav`` was refused ("two recordings are named 'same'; rename one", exit 1), though a name
    that meets another after it is made safe gets a -2; and the same file named twice exited 1, not 2."""
    from voxline.realtime.errors import UsageError

    for folder in ("d1", "d2", "d3", "d4"):
        (tmp_path / folder).mkdir()
        make_recording(tmp_path / folder / "call.wav", 1, False)
    make_recording(tmp_path / "d4" / "call-2.wav", 1, False)  # a stem that is what the second call would become
    with pytest.raises(UsageError, match="call.wav is given twice; give each recording once"):
        recordings_from_paths([tmp_path / "d1" / "call.wav", tmp_path / "d1" / ".." / "d1" / "call.wav"])
    with pytest.raises(UsageError, match="call.wav is given twice"):  # by its folder and by its name
        recordings_from_paths([tmp_path / "d1", tmp_path / "d1" / "call.wav"])
    given = [tmp_path / "d3" / "call.wav", tmp_path / "d4", tmp_path / "d1" / "call.wav", tmp_path / "d2" / "call.wav"]
    found = {r.name: r.path.relative_to(tmp_path).as_posix() for r in recordings_from_paths(given)}
    assert found == {"call": "d1/call.wav", "call-3": "d2/call.wav", "call-4": "d3/call.wav", "call-5": "d4/call.wav",
                     "call-2": "d4/call-2.wav"}  # in the order of their paths, whatever the order given


def test_a_sidecar_that_cannot_be_read_is_its_recordings_error_and_the_others_run(tmp_path: Path) -> None:
    """A ``NAME.txt`` beside ``NAME.wav`` that is not UTF-8 ended the whole farm before anything ran, where a WAV
    that cannot be read is that recording's ``error`` verdict and the others run."""
    from voxline.session.replay.farm.runner import FarmOptions, run_part
    from voxline.session.settings import SessionSettings

    for name in ("bad", "good"):
        make_recording(tmp_path / f"{name}.wav", 1, False)
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 au lait\n")  # Latin-1
    (tmp_path / "good.txt").write_text("hello\n", encoding="utf-8")
    (tmp_path / "farm.toml").write_text('[[recording]]\npath = "bad.wav"\n[[recording]]\npath = "good.wav"\n')
    for recordings in (recordings_from_paths([tmp_path]), load_manifest(tmp_path / "farm.toml")):
        assert [(r.name, r.transcripts) for r in recordings] == [("bad", None), ("good", ("hello",))]
        options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, jobs=2, voice="tone")
        rows = run_part([r.model_dump(mode="json") for r in assign_folders(recordings)], options)
        assert [(r["name"], r["status"]) for r in rows] == [("bad", "error"), ("good", "pass")], rows
        assert rows[0]["error"] == f"transcripts {tmp_path / 'bad.txt'} are not UTF-8 text"


def test_shards_are_zero_based_deterministic_and_cover_every_recording_once() -> None:
    items = [f"r{n:02}" for n in range(23)]
    shards = [parse_shard(f"{i}/4").take(items) for i in range(4)]
    assert sorted(x for s in shards for x in s) == items
    assert {len(s) for s in shards} == {5, 6}
    assert shards[0][:2] == ["r00", "r04"] and parse_shard(" 3 / 4 ") == Shard(3, 4)
    assert deal(items[:3], 8) == [["r00"], ["r01"], ["r02"]]  # never an empty part
    for bad, why in (("4/4", "I must be 0 to 3"), ("1/0", "N must be at least 1"), ("two/4", "takes I/N")):
        with pytest.raises(ConfigurationError, match=why):
            parse_shard(bad)


def test_expectations_are_judged_against_what_was_measured() -> None:
    m = Measured(barge_ins=2, cut_errors_ms=[-0.4, 0.2], reply_latencies_ms=[530.0, 1200.0], error_codes=["x"])
    checks = judge(Expectations.model_validate({"barge_ins": 2, "max_cut_error_ms": 0.3,
                                                "max_reply_latency_ms": 1500, "no_errors": True}), m)
    assert checks == [Check("barge_ins", "2", 2, True), Check("max_cut_error_ms", "<= 0.3", 0.4, False),
                      Check("max_reply_latency_ms", "<= 1500", 1200.0, True), Check("no_errors", "none", ["x"], False)]
    assert judge(Expectations.model_validate({"barge_ins": {"min": 3}}), m) == [Check("barge_ins", ">= 3", 2, False)]
    assert outcome("r", "r.wav", Expectations(), m).status == "pass"  # nothing expected: a run without fatal errors
    assert outcome("r", "r.wav", Expectations(), Measured(fatal=["boom"])).status == "error"


def test_a_failed_tool_call_is_an_error_no_errors_refuses() -> None:
    """A tool that raised was answered with an error output and reported only as a tool event: a farm expecting
    no errors passed it."""
    from voxline.session.events import SessionError
    from voxline.session.replay.farm.results import measure
    from voxline.session.replay.result import ReplayResult
    from voxline.session.tools import ToolFinished

    result = ReplayResult(None, events=[ToolFinished("c1", "lookup", '{"ok":1}', True, 0.1),
                                        SessionError("the server went quiet", "server_silent"),
                                        ToolFinished("c2", "lookup", '{"error":"lookup failed: boom"}', False, 0.1)])
    m = measure(result)
    assert m.error_codes == ["server_silent", "tool_failed:lookup"]
    assert judge(Expectations(no_errors=True), m) == [Check("no_errors", "none", m.error_codes, False)]


def test_junit_has_a_case_per_recording_and_a_one_line_failure() -> None:
    outcomes = [
        Outcome("ok", "ok.wav", "pass", [Check("barge_ins", "1", 1, True)], barge_ins=1, wall_s=0.5),
        Outcome("bad <&>", "bad.wav", "fail", [Check("barge_ins", "2", 1, False), Check("max_cut_error_ms", "<= 5", 0.1, True)]),
        Outcome("broken", "broken.wav", "error", error="cannot read broken.wav: not a WAV file"),
    ]
    root = ET.fromstring(junit_xml(outcomes, wall_s=2.0))
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["ok", "bad <&>", "broken"]
    assert cases["ok"].find("failure") is None and cases["ok"].find("error") is None
    (failure,) = cases["bad <&>"].findall("failure")
    assert failure.get("message") == "barge_ins: expected 2, measured 1"
    assert cases["broken"].find("error").get("message") == "cannot read broken.wav: not a WAV file"  # type: ignore[union-attr]
    assert all(float(c.get("time", "x")) >= 0 for c in cases.values())


def test_junit_of_a_name_with_control_characters_is_still_xml() -> None:
    """A manifest may name a recording anything: before, an escape sequence in a name made a file no XML reader
    takes."""
    outcomes = [Outcome("\x1b[2Jx", "a\x01.wav", "error", error="cannot read a\x01.wav: \x00 not a WAV file")]
    root = ET.fromstring(junit_xml(outcomes))
    (case,) = root.iter("testcase")
    assert (case.get("name"), case.get("file")) == ("\\x1b[2Jx", "a\\x01.wav")
    assert case.find("error").get("message") == "cannot read a\\x01.wav: \\x00 not a WAV file"  # type: ignore[union-attr]


# the command, as a user runs it

def toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # numbers and booleans are spelt alike

FARM_SIZE = 52


@pytest.fixture(scope="module")
def farm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """52 recordings (every third without an interruption) and a manifest with an expectation for each."""
    base = tmp_path_factory.mktemp("farm")
    (base / "calls").mkdir()
    entries = []
    for n in range(FARM_SIZE):
        interrupt = n % 3 != 0
        make_recording(base / "calls" / f"call{n:02}.wav", n, interrupt)
        expect = {"barge_ins": 1 if interrupt else 0, "max_cut_error_ms": 1.0, "max_reply_latency_ms": 2000}
        if n % 4 == 0:
            expect = {"barge_ins": {"min": 0, "max": 1}, "no_errors": True}
        if n == 7:
            expect = {"barge_ins": 2}  # one barge-in happens: this one must fail
        inline = ", ".join(f"{k} = {toml_value(v)}" for k, v in expect.items())
        entries.append(f'[[recording]]\npath = "calls/call{n:02}.wav"\nexpect = {{ {inline} }}\n')
    write_manifest(base / "farm.toml", "\n".join(entries))
    return base


@pytest.mark.slow
def test_a_farm_of_52_recordings_in_two_processes_reports_each_and_fails_on_one(farm_dir: Path) -> None:
    out, junit = farm_dir / "out", farm_dir / "junit.xml"
    run = voxline("replay", "--manifest", str(farm_dir / "farm.toml"), "--fast", "--voice", "tone", "--jobs", "8",
                  "--processes", "2", "--out-dir", str(out), "--junit", str(junit))
    assert run.returncode == 1, run.stderr  # one expectation fails
    assert "Traceback" not in run.stderr
    assert f"farm: {FARM_SIZE} recordings, {FARM_SIZE - 1} passed, 1 failed, 0 errors" in run.stdout
    assert "FAIL  call07 (1 barge-in" in run.stdout and "barge_ins: expected 2, measured 1" in run.stdout
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["name"] for r in rows] == [f"call{n:02}" for n in range(FARM_SIZE)]
    for n, row in enumerate(rows):
        assert row["status"] == ("fail" if n == 7 else "pass"), row
        assert row["barge_ins"] == (0 if n % 3 == 0 else 1)
        assert row["checks"] and all(set(c) == {"name", "expected", "measured", "ok"} for c in row["checks"])
        assert len(row["cut_errors_ms"]) == row["barge_ins"] and all(abs(e) <= 1 for e in row["cut_errors_ms"])
        assert row["reply_latencies_ms"] and row["error_codes"] == [] and row["wall_s"] > 0
        assert Path(row["heard"]) == out / row["name"] / "heard.wav" and (out / row["name"] / "events.jsonl").is_file()
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(FARM_SIZE) and suite.get("failures") == "1"
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["call07"]
    assert failed[0].find("failure").get("message") == "barge_ins: expected 2, measured 1"  # type: ignore[union-attr]
    # each session of the farm heard exactly what a replay of its recording alone hears, to the sample
    for name in ("call01", "call30"):
        samples, _rate = read_wav(farm_dir / "calls" / f"{name}.wav")
        alone = replay_fast(samples, scenario=load_scenario(None), voice="tone")
        assert alone.heard is not None
        assert np.array_equal(read_wav(out / name / "heard.wav")[0], alone.heard)


CRASHING_TOOLS = """
import os
from voxline.session.tools import ToolRegistry

registry = ToolRegistry()


@registry.tool
def get_weather(city: str = "", unit: str = "") -> str:
    with open(os.path.join("out", "r0", "events.jsonl"), "ab") as log:  # as a kill part way through a write leaves it
        log.write(b'{"t_ms": 1.5, "dir": "in", "event": {"type": "respo')
    os._exit(3)  # the worker process dies, as it would killed for its memory


@registry.tool
def get_time(zone: str = "") -> str:
    return "noon"
"""


@pytest.mark.slow
def test_a_worker_process_that_dies_costs_only_the_recording_it_ran(tmp_path: Path) -> None:
    """A worker that died (a tool calling os._exit, an OOM kill) turned its whole share into errors, recordings it
    never started included, all saying only 'its worker process ended without a verdict'."""
    (tmp_path / "crashtools.py").write_text(CRASHING_TOOLS, encoding="utf-8")
    for n in range(4):
        make_recording(tmp_path / f"r{n}.wav", n, n % 2 == 0)
    entries = [f'[[recording]]\npath = "r{n}.wav"\n' for n in range(4)]
    entries[0] += 'scenario = "tools"\ntools = "crashtools:registry"\n'  # dealt first to the first worker
    write_manifest(tmp_path / "farm.toml", "\n".join(entries))
    run = subprocess.run([sys.executable, "-m", "voxline", "replay", "--manifest", "farm.toml", "--fast", "--voice",
                          "tone", "--jobs", "1", "--processes", "2", "--out-dir", "out"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 1, run.stderr
    assert "farm: 4 recordings, 3 passed, 0 failed, 1 error" in run.stdout, run.stdout + run.stderr
    rows = {r["name"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert rows["r0"]["status"] == "error"
    assert rows["r0"]["error"] == "its worker process exited with status 3 while it ran (what ran is in its folder)"
    log = (tmp_path / "out" / "r0" / "events.jsonl").read_text(encoding="utf-8")
    assert log.endswith("\n") and all(json.loads(line) for line in log.splitlines())  # cut back to whole lines
    assert all(rows[f"r{n}"]["status"] == "pass" for n in (1, 2, 3))  # r2, dealt to the same worker, ran on a new one


CHATTY_TOOLS = """
from voxline.session.tools import ToolRegistry

print("chatty: imported")
registry = ToolRegistry()


@registry.tool
def get_weather(city: str = "", unit: str = "") -> str:
    print("weather called")
    return "sunny"


@registry.tool
def get_time(zone: str = "") -> str:
    print("time called")
    return "noon"
"""


def test_results_on_stdout_stay_the_document_alone_with_workers_that_print(tmp_path: Path) -> None:
    """``--results -`` with ``--processes 2``: the workers had the command's stdout, and what a tool module
    printed (on import and when called) came before the JSON lines."""
    (tmp_path / "chatty.py").write_text(CHATTY_TOOLS, encoding="utf-8")
    for n in range(2):
        make_recording(tmp_path / f"r{n}.wav", n, False)
    run = subprocess.run([sys.executable, "-m", "voxline", "replay", "r0.wav", "r1.wav", "--fast", "--voice", "tone",
                          "--scenario", "tools", "--tools", "chatty:registry", "--processes", "2", "--out-dir", "out",
                          "--results", "-"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert [json.loads(line)["name"] for line in run.stdout.splitlines()] == ["r0", "r1"]
    assert "chatty: imported" in run.stderr and "weather called" in run.stderr  # said, where people read


@pytest.mark.slow
def test_shards_of_a_directory_add_up_to_the_whole_farm(farm_dir: Path, tmp_path: Path) -> None:
    names = []
    for i in range(3):
        run = voxline("replay", str(farm_dir / "calls"), "--fast", "--voice", "tone", "--shard", f"{i}/3",
                      "--jobs", "20", "--out-dir", str(tmp_path / f"shard{i}"))
        assert run.returncode == 0, run.stderr  # no expectations from a directory: every run without errors passes
        rows = [json.loads(line) for line in (tmp_path / f"shard{i}" / "results.jsonl").read_text().splitlines()]
        assert [r["name"] for r in rows] == [f"call{n:02}" for n in range(i, FARM_SIZE, 3)]
        names += [r["name"] for r in rows]
    assert sorted(names) == [f"call{n:02}" for n in range(FARM_SIZE)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--out-dir", "{tmp}/o", "--shard", "3/3"], "--shard 3/3: I must be 0 to 2"),
        (["--out", "{tmp}/h.wav"], "--out applies to a single replay"),
        ([], "a farm needs --out-dir DIR"),
        (["--out-dir", "{tmp}/o", "--tools", "nomodule"], "argument --tools: takes MODULE:ATTR"),
        (["--out-dir", "{tmp}/o", "--jobs", "0"], "argument --jobs: expected a whole number of at least 1"),
        (["--out-dir", "-"], "--out-dir takes a folder, not '-'"),  # before, a folder called '-' was made
    ],
)
def test_farm_mistakes_are_one_line(farm_dir: Path, tmp_path: Path, args: list[str], expected: str) -> None:
    inputs = [str(farm_dir / "calls" / "call00.wav"), str(farm_dir / "calls" / "call01.wav")]
    run = voxline("replay", *inputs, "--fast", *[a.format(tmp=tmp_path) for a in args])
    assert expected in one_line_error(run)


@pytest.mark.slow
def test_farm_flags_on_one_recording_are_refused(farm_dir: Path, tmp_path: Path) -> None:
    run = voxline("replay", str(farm_dir / "calls" / "call00.wav"), "--fast", "--jobs", "2", "--out",
                  str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl"))
    assert "--jobs applies to a farm" in one_line_error(run)
    run = voxline("replay", str(farm_dir / "calls" / "call00.wav"), "--fast", "--farm-report")
    assert "--farm-report applies to a farm" in one_line_error(run)


def _listener_timeline(sink: object, minutes: float) -> None:
    """What a replay's output does to its sink: one 20 ms block after another, a cut every 7 s reaching back 0.1 s."""
    rng = np.random.default_rng(5)
    blocks = [(rng.standard_normal(480) * 3000).astype(np.int16) for _ in range(16)]
    for k in range(int(minutes * 60 * 50)):
        t = k * 480 / SAMPLE_RATE
        sink.write(t, blocks[k % 16])  # type: ignore[attr-defined]
        if k % 350 == 349:
            sink.apply_cut(t - 0.1, t - 0.095)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_heard_wav_is_streamed_to_disk_and_equals_the_timeline_in_memory(tmp_path: Path) -> None:
    import tracemalloc

    from voxline.audio.sinks import TimelineSink, WavSink

    minutes = 20.0
    size = int(minutes * 60 * SAMPLE_RATE) * 2  # bytes of 16-bit samples
    tracemalloc.start()
    try:
        with WavSink(tmp_path / "heard.wav") as sink:
            _listener_timeline(sink, minutes)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 20, f"peak {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of audio"  # seconds, not minutes
    memory = TimelineSink()
    _listener_timeline(memory, minutes)
    on_disk, rate = read_wav(tmp_path / "heard.wav")
    assert rate == SAMPLE_RATE and len(on_disk) == len(memory.samples) == size // 2
    assert np.array_equal(on_disk, memory.samples)


@pytest.mark.slow
def test_a_real_time_farm_runs_its_sessions_on_one_loop_each_with_its_own_server(tmp_path: Path) -> None:
    for n in range(3):
        make_recording(tmp_path / f"rt{n}.wav", n, interrupt=n != 1)
    run = voxline("replay", *(str(tmp_path / f"rt{n}.wav") for n in range(3)), "--voice", "tone", "--jobs", "3",
                  "--out-dir", str(tmp_path / "out"), "--junit", str(tmp_path / "junit.xml"))
    assert run.returncode == 0, run.stderr
    assert "real time, a built-in server per recording" in run.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [(r["name"], r["status"], r["barge_ins"]) for r in rows] == [("rt0", "pass", 1), ("rt1", "pass", 0),
                                                                       ("rt2", "pass", 1)]
    assert all(abs(e) <= 1 for r in rows for e in r["cut_errors_ms"])
    assert ET.parse(tmp_path / "junit.xml").getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]


def test_a_farm_that_cannot_connect_leaves_each_recordings_last_files_as_they_were(tmp_path: Path) -> None:
    farm, out = tmp_path / "farm", tmp_path / "out"
    farm.mkdir()
    for k, name in enumerate(("a", "b")):
        make_recording(farm / f"{name}.wav", k, interrupt=False)
        (out / name).mkdir(parents=True)
        (out / name / "heard.wav").write_bytes(f"{name}: the last run's audio".encode())
        (out / name / "events.jsonl").write_text(f'{{"last run": "{name}"}}\n')
    make_recording(farm / "c.wav", 2, interrupt=False)  # never run before: no folder of its own is left either
    run = subprocess.run([str(VOXLINE), "replay", str(farm), "--out-dir", str(out), "--url", "ws://127.0.0.1:9/v1"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.returncode == 1 and run.stdout.count("cannot connect") == 3, run.stdout + run.stderr
    assert not (out / "c").exists()
    for name in ("a", "b"):
        assert (out / name / "heard.wav").read_bytes() == f"{name}: the last run's audio".encode()
        assert (out / name / "events.jsonl").read_text() == f'{{"last run": "{name}"}}\n'
        assert sorted(p.name for p in (out / name).iterdir()) == ["events.jsonl", "heard.wav"]


def test_a_farm_whose_server_hangs_up_after_the_first_frame_leaves_each_recordings_last_files(tmp_path: Path) -> None:
    farm, out = tmp_path / "farm", tmp_path / "out"
    farm.mkdir()
    make_recording(farm / "a.wav", 0, interrupt=False)
    (out / "a").mkdir(parents=True)
    (out / "a" / "heard.wav").write_bytes(b"a: the last run's audio")
    code = (
        "import asyncio, subprocess, sys\n"
        "from tests.support.silent_server import hanging_up\n"
        "async def main():\n"
        "    async with hanging_up(True) as s:\n"
        "        r = await asyncio.to_thread(subprocess.run, [sys.executable, '-m', 'voxline', 'replay',\n"
        f"            {str(farm)!r}, '--out-dir', {str(out)!r}, '--url', s.url], capture_output=True, text=True)\n"
        "        print(r.returncode); sys.stdout.write(r.stdout)\n"
        "asyncio.run(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180,
                         env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.stdout.splitlines()[0] == "1" and "never sent an event" in run.stdout, run.stdout + run.stderr
    assert (out / "a" / "heard.wav").read_bytes() == b"a: the last run's audio"
    assert sorted(p.name for p in (out / "a").iterdir()) == ["heard.wav"]  # no empty events.jsonl, new this run


def test_the_resource_tracker_of_a_farm_in_processes_outlives_a_hangup() -> None:
    """A closed terminal signals the whole process group: the tracker of the workers' queue ignores it."""
    code = ("import signal\n"
            "from multiprocessing import resource_tracker\n"
            "from voxline.session.replay.farm.processes import _tracker_outlives_a_hangup\n"
            "before = signal.getsignal(signal.SIGHUP)\n"  # inherited: SIG_IGN under nohup
            "_tracker_outlives_a_hangup()\n"
            "pid = resource_tracker._resource_tracker._pid\n"
            "status = open(f'/proc/{pid}/status').read()\n"
            "ignored = int(next(l for l in status.splitlines() if l.startswith('SigIgn:')).split()[1], 16)\n"
            "print(bool(ignored & (1 << (signal.SIGHUP - 1))), signal.getsignal(signal.SIGHUP) is before)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["True", "True"], run.stderr  # and this process's own handler is as it was


@pytest.mark.parametrize(("entry", "url", "expected"), [
    ('scenario = "tools"\n', True, ": a: scenario 'tools' applies to the built-in server only, and --url names a "
                                     "server"),
    ('scenario = "gone.toml"\n', False, ": a: scenario: cannot read scenario "),
], ids=["scenario with --url", "missing scenario file"])
def test_a_manifests_scenario_is_refused_naming_the_manifest_and_the_recording(tmp_path: Path, entry: str, url: bool,
                                                                               expected: str) -> None:
    """A manifest's scenario was ignored without a word against --url (the flag is refused there), and a scenario
    file it named that is not there was 'cannot read scenario /abs/gone.toml', naming neither."""
    make_recording(tmp_path / "a.wav", 0, False)
    manifest = write_manifest(tmp_path / "farm.toml", f'[[recording]]\npath = "a.wav"\n{entry}')
    run = subprocess.run([sys.executable, "-m", "voxline", "replay", "--manifest", str(manifest), "--out-dir", "out",
                          *(["--url", "ws://127.0.0.1:9/v1"] if url else [])], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    line = one_line_error(run)
    assert run.returncode == 1 and line.startswith(f"voxline replay: error: manifest {manifest}{expected}"), line


def test_a_worker_starts_ignoring_ctrl_c_with_the_commands_stderr_as_its_stdout() -> None:
    """Ctrl-C reaches the whole process group: a worker still importing printed a KeyboardInterrupt traceback
    (the command stops its workers with SIGTERM, and a worker's run installs its own stop). What the worker
    prints goes to the command's stderr, and the command's own handler and stdout are as they were after."""
    code = ("import os, signal, subprocess, sys\n"
            "from voxline.session.replay.farm.processes import _as_a_worker_starts\n"
            "before = signal.getsignal(signal.SIGINT)\n"
            "with _as_a_worker_starts():\n"
            "    child = subprocess.Popen([sys.executable, '-c', 'import signal; "
            "print(\"child ignores SIGINT:\", signal.getsignal(signal.SIGINT) is signal.SIG_IGN)'])\n"
            "child.wait()\n"
            "print('parent handler kept:', signal.getsignal(signal.SIGINT) is before)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.splitlines() == ["parent handler kept: True"], run.stdout + run.stderr
    assert "child ignores SIGINT: True" in run.stderr


def test_expectations_given_from_python_take_numpy_counts_and_flags_only_a_manifest_is_strict(tmp_path: Path) -> None:
    given = Expectations.model_validate({"barge_ins": np.int64(1), "no_errors": np.bool_(True),
                                         "max_cut_error_ms": np.float32(5)})  # run.check(**figures) from code
    assert given == Expectations(barge_ins=1, no_errors=True, max_cut_error_ms=5)
    assert Expectations.model_validate({"barge_ins": {"min": np.int64(2)}}).barge_ins == Range(min=2)
    make_recording(tmp_path / "r.wav", 1, False)
    manifest = write_manifest(tmp_path / "farm.toml", '[[recording]]\npath = "r.wav"\nexpect = { no_errors = "no" }\n')
    with pytest.raises(ConfigurationError, match="expect.no_errors: takes true or false"):
        load_manifest(manifest)
