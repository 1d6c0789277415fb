"""The pytest plugin, as an application's test suite meets it: pytest run in a fresh process on a
temporary project, the plugin found through its ``pytest11`` entry point.

Farm manifests (``*.farm.toml``) become one item per recording, with the failed expectations as the
failure; ``-k``, ``-x`` and ``--junitxml`` behave as for any test; the ``voxline_replay`` fixture runs
a lockstep replay inside a test.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.farm import make_recording
from tests.support.wav_bytes import write_chunked_wav

pytest_plugins = ["pytester"]

MANIFEST = """
[defaults]
expect = { no_errors = true }

[[recording]]
path = "calls/call1.wav"
name = "asks_only"
expect = { barge_ins = 0 }

[[recording]]
path = "calls/call2.wav"
name = "interrupts"
expect = { barge_ins = 1, max_cut_error_ms = 5 }

[[recording]]
path = "calls/call3.wav"
name = "wrong_count"
expect = { barge_ins = 2 }
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    calls = pytester.path / "calls"
    calls.mkdir()
    make_recording(calls / "call1.wav", 0, interrupt=False)
    make_recording(calls / "call2.wav", 1, interrupt=True)
    make_recording(calls / "call3.wav", 2, interrupt=True)
    (pytester.path / "calls.farm.toml").write_text(MANIFEST, encoding="utf-8")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--voxline-voice", "tone", *args, timeout=300)


@pytest.mark.slow
def test_each_recording_is_an_item_and_a_failed_expectation_is_its_failure(project: pytest.Pytester) -> None:
    result = run(project, "-v", "--junitxml", "junit.xml", "--voxline-out-dir", "out")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "calls.farm.toml::asks_only PASSED" in out and "calls.farm.toml::wrong_count FAILED" in out
    assert "wrong_count.wav" not in out  # the item is named by the recording's name, its file is in the message
    assert "call3.wav failed: barge_ins: expected 2, measured 1" in out
    assert "Traceback" not in out
    cases = {c.get("name"): c for c in ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    assert set(cases) == {"asks_only", "interrupts", "wrong_count"}
    failure = cases["wrong_count"].find("failure")
    assert failure is not None and "barge_ins: expected 2, measured 1" in (failure.get("message") or "")
    assert (project.path / "out" / "calls.farm.toml" / "interrupts" / "heard.wav").is_file()


@pytest.mark.slow
def test_k_selects_recordings_by_name_and_x_stops_at_the_first_failure(project: pytest.Pytester) -> None:
    selected = run(project, "-k", "interrupts or asks")
    selected.assert_outcomes(passed=2, deselected=1)
    (project.path / "calls.farm.toml").write_text(MANIFEST.replace('name = "asks_only"\nexpect = { barge_ins = 0 }',
                                                                  'name = "asks_only"\nexpect = { barge_ins = 3 }'))
    stopped = run(project, "-x")
    stopped.assert_outcomes(failed=1)  # asks_only fails first; nothing after it runs
    assert "stopping after 1 failures" in stopped.stdout.str()


@pytest.mark.slow
def test_a_recording_that_cannot_run_fails_its_item_with_one_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "calls").mkdir()
    write_chunked_wav(pytester.path / "calls" / "cut.wav", bytes(48_000), 24_000, 1, 16, 1, data_size=480_000)
    (pytester.path / "broken.farm.toml").write_text('[[recording]]\npath = "calls/cut.wav"\n', encoding="utf-8")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert "cut.wav could not run: cannot read" in result.stdout.str() and "cut short" in result.stdout.str()
    # a manifest that does not validate is a collection error, one line naming the file and field
    (pytester.path / "bad.farm.toml").write_text('[[recording]]\npath = "calls/cut.wav"\nexpect = { barge = 1 }\n',
                                                 encoding="utf-8")
    bad = run(pytester)
    bad.assert_outcomes(errors=1)
    assert "bad.farm.toml: recording 1: expect.barge: not a field of this table" in bad.stdout.str()


@pytest.mark.slow
def test_other_toml_files_and_tests_are_left_alone(pytester: pytest.Pytester) -> None:
    (pytester.path / "settings.toml").write_text("[[recording]]\npath = 'x.wav'\n", encoding="utf-8")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    run(pytester).assert_outcomes(passed=1)


def test_loading_the_plugin_imports_nothing_else_of_voxline() -> None:
    code = "import sys, voxline.pytest_plugin; print(sorted(m for m in sys.modules if m.startswith('voxline')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['voxline', 'voxline.pytest_plugin']"


FIXTURE_TEST = """
from voxline.session.replay.check import ReplayRun


def test_the_cut_is_where_the_listener_was(voxline_replay):
    run = voxline_replay("calls/call2.wav")
    assert isinstance(run, ReplayRun)
    run.check(barge_ins=1, max_cut_error_ms=5, no_errors=True)
    (truncate,) = run.sent_of("conversation.item.truncate")
    (barge_in,) = run.result.barge_ins
    assert truncate["audio_end_ms"] == barge_in.audio_end_ms
    assert len(run.heard) >= 6 * 24000


def test_a_wrong_expectation_says_what_was_measured(voxline_replay):
    voxline_replay("calls/call2.wav").check(barge_ins=3)
"""


@pytest.mark.slow
def test_the_fixture_runs_a_lockstep_replay_inside_a_test(pytester: pytest.Pytester) -> None:
    (pytester.path / "calls").mkdir()
    make_recording(pytester.path / "calls" / "call2.wav", 1, interrupt=True)
    pytester.makepyfile(test_app=FIXTURE_TEST)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    assert "AssertionError: barge_ins: expected 3, measured 1" in result.stdout.str()


def test_the_example_uses_the_fixture() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "interruption_test.py"
    assert "voxline_replay" in example.read_text(encoding="utf-8")


@pytest.mark.slow
def test_recordings_and_manifests_whose_names_meet_write_to_folders_of_their_own(pytester: pytest.Pytester) -> None:
    """'x y' and 'x_y' in one manifest, and tests/a/b.farm.toml beside tests/a_b.farm.toml, wrote the same
    folders: one recording's heard audio silently replaced another's."""
    calls = pytester.path / "calls"
    calls.mkdir()
    make_recording(calls / "c.wav", 0, interrupt=True)
    (pytester.path / "tests" / "a").mkdir(parents=True)
    two = '[[recording]]\npath = "../calls/c.wav"\nname = "x y"\n[[recording]]\npath = "../calls/c.wav"\nname = "x_y"\n'
    (pytester.path / "tests" / "a_b.farm.toml").write_text(two, encoding="utf-8")
    (pytester.path / "tests" / "a" / "b.farm.toml").write_text(two.replace("../calls", "../../calls"),
                                                              encoding="utf-8")
    out = pytester.path / "out"
    run(pytester, "--voxline-out-dir", str(out)).assert_outcomes(passed=4)
    heard = sorted(p.relative_to(out).as_posix() for p in out.rglob("heard.wav"))
    assert len(heard) == 4 and len({h.casefold() for h in heard}) == 4, heard
    # a run that collects one of them (--lf, a path named) writes where a whole run does, over nobody else's
    before = {h: (out / h).stat().st_mtime_ns for h in heard}
    run(pytester, "--voxline-out-dir", str(out), "tests/a_b.farm.toml").assert_outcomes(passed=2)
    after = {p.relative_to(out).as_posix(): p.stat().st_mtime_ns for p in out.rglob("heard.wav")}
    assert after.keys() == before.keys()
    assert [h for h in heard if after[h] != before[h]] == [h for h in heard if h.startswith("tests/a_b.farm.toml/")]


@pytest.mark.slow
def test_a_glob_with_a_slash_matches_the_files_path_and_an_output_is_never_the_recording(
        pytester: pytest.Pytester) -> None:
    """``voxline_farms = calls/*.toml`` (the README's example) collected nothing: globs were matched against the
    file's name alone. A manifest whose recording was an earlier run's heard.wav had it written over."""
    calls = pytester.path / "calls"
    calls.mkdir()
    make_recording(calls / "c.wav", 0, interrupt=True)
    (calls / "refunds.toml").write_text('[[recording]]\npath = "c.wav"\nname = "r"\n', encoding="utf-8")
    pytester.makeini("[pytest]\nvoxline_farms = calls/*.toml\n")
    run(pytester, "--voxline-out-dir", str(pytester.path / "out")).assert_outcomes(passed=1)
    before = (pytester.path / "out" / "calls" / "refunds.toml" / "r" / "heard.wav").read_bytes()
    (calls / "refunds.toml").write_text('[[recording]]\npath = "../out/calls/refunds.toml/r/heard.wav"\nname = "r"\n',
                                        encoding="utf-8")
    result = run(pytester, "--voxline-out-dir", str(pytester.path / "out"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*could not run: *is the input*inputs are never overwritten*"])
    assert (pytester.path / "out" / "calls" / "refunds.toml" / "r" / "heard.wav").read_bytes() == before
