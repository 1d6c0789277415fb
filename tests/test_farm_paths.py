"""A farm's outputs cannot escape --out-dir, overwrite an input or collide, and the README's farm,
CI-matrix and Kubernetes command lines work verbatim on a fresh tree.

The naming rules are tested on plain data; the command runs as a user runs it, the installed
``voxline``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from voxline.realtime.errors import ConfigurationError
from voxline.session.replay.farm import FarmRecording
from voxline.session.replay.farm.layout import assign_folders, check_outputs, safe_folder
from tests.support.ci import ROOT
from tests.support.cli import EXAMPLE, VOXLINE, one_line_error
from tests.support.farm import make_recording


def rec(name: str, path: str = "/calls/x.wav") -> FarmRecording:
    return FarmRecording(name=name, path=Path(path))


@pytest.mark.parametrize(("name", "folder"), [
    ("..", "_.."), (".", "_."), ("...", "_..."), (".hidden", "_.hidden"), ("a b/c\\d", "a_b_c_d"),
    ("réunion", "réunion"), ("x" * 300, "x" * 100), ("", "_"), ("nul\x00", "nul_"),
    ("日本語" * 34, "日本語" * 11),  # 100 bytes at most, cut between characters: 300 bytes passed a file system's 255
])
def test_a_name_becomes_one_path_component_that_stays_put(name: str, folder: str) -> None:
    assert safe_folder(name) == folder
    assert (Path("/out") / safe_folder(name)).resolve().parent == Path("/out")


def test_a_folder_the_file_system_refuses_is_that_recordings_error_alone(tmp_path: Path) -> None:
    """'File name too long' escaped the recording's replay as an exception: the farm's task group cancelled
    every other recording, and no results were written."""
    from voxline.session.replay.farm.runner import FarmOptions, run_part
    from voxline.session.settings import SessionSettings

    make_recording(tmp_path / "a.wav", 0, True)
    recordings = [FarmRecording(name="fine", path=tmp_path / "a.wav", folder="fine"),
                  FarmRecording(name="too long", path=tmp_path / "a.wav", folder="x" * 300)]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, jobs=2, voice="tone")
    rows = run_part([r.model_dump(mode="json") for r in recordings], options)
    assert [(r["name"], r["status"]) for r in rows] == [("fine", "pass"), ("too long", "error")], rows
    assert "too long" in rows[1]["error"].lower(), rows[1]


def test_a_directorys_recordings_are_its_wav_files_whatever_the_case_of_their_suffix(tmp_path: Path) -> None:
    """A folder of ``A.WAV`` and ``b.Wav`` was 'no *.wav recordings in this directory', though each file alone
    replays."""
    from voxline.session.replay.farm import recordings_from_paths

    for name in ("b.Wav", "A.WAV", "c.wav"):
        make_recording(tmp_path / name, 0, False)
    (tmp_path / "notes.txt.bak").write_text("x")
    (tmp_path / "takes.wav").mkdir()  # a folder so named is no recording (before: one, failing "cannot read")
    (tmp_path / "gone.wav").symlink_to(tmp_path / "nowhere.wav")  # a broken link is one: its own error says why
    assert [r.name for r in recordings_from_paths([tmp_path])] == ["A", "b", "c", "gone"]


def test_a_directorys_hidden_files_are_left_out_and_a_linked_recording_keeps_its_own_path(tmp_path: Path) -> None:
    """A Mac leaves ``._a.wav`` beside ``a.wav`` on a shared drive: it was a recording, an error ("not a WAV
    file") that failed the farm, where a shell's ``*`` leaves it out. A folder of links to recordings elsewhere
    had every result name the file the link leads to."""
    from voxline.session.replay.farm import recordings_from_paths

    calls, store = tmp_path / "calls", tmp_path / "store"
    calls.mkdir()
    store.mkdir()
    make_recording(calls / "a.wav", 0, False)
    (calls / "._a.wav").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    make_recording(store / "take-17.wav", 1, False)
    (calls / "b.wav").symlink_to(store / "take-17.wav")
    found = recordings_from_paths([calls])
    assert [(r.name, r.path) for r in found] == [("a", calls / "a.wav"), ("b", calls / "b.wav")]


def test_a_path_that_is_not_utf8_is_written_as_an_escape_and_every_verdict_is_kept(tmp_path: Path) -> None:
    """A folder named in Latin-1 (``caf\xe9``): the results line for it raised UnicodeEncodeError, which ended
    the farm with a traceback, an empty results file and no JUnit; a single replay's summary did the same."""
    folder = tmp_path / "caf\udce9"  # the byte 0xe9, as Python names it in a path
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.wav").write_bytes(EXAMPLE.read_bytes())
    out = tmp_path / "out"
    run = subprocess.run([str(VOXLINE), "replay", str(folder), "--local", "--fast", "--voice", "tone", "--out-dir",
                          str(out), "--junit", str(out / "junit.xml")], capture_output=True, timeout=300)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr.decode(errors="replace")
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert [(line["name"], line["status"], line["input"]) for line in lines] == [
        ("a", "pass", str(folder / "a.wav")), ("b", "pass", str(folder / "b.wav"))]  # read back as it was
    assert "caf\\udce9" in (out / "junit.xml").read_text("utf-8")
    single = subprocess.run([str(VOXLINE), "replay", str(folder / "a.wav"), "--local", "--fast", "--voice", "tone",
                             "--out", str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl"),
                             "--summary", str(tmp_path / "s.json"), "--report", str(tmp_path / "r.html")],
                            capture_output=True, timeout=300)
    assert single.returncode == 0 and b"Traceback" not in single.stderr, single.stderr.decode(errors="replace")
    summary = json.loads((tmp_path / "s.json").read_text("utf-8"))
    assert summary["pass"] is True and summary["input"] == str(folder / "a.wav")


@pytest.mark.parametrize(("flags", "written"), [
    (["--summary", "a.txt"], "a.txt"),  # the recording's sidecar transcript
    (["--events", "a.txt"], "a.txt"),
    (["--scenario", "s.toml", "--summary", "s.toml"], "s.toml"),
    (["--tools", "mytools:registry", "--report", "mytools.py"], "mytools.py"),
    (["--tools", "mytools:registry", "--out-dir", "out", "--junit", "mytools.py"], "mytools.py"),  # a farm
], ids=["summary over sidecar", "events over sidecar", "scenario", "tools module", "farm junit over tools"])
def test_no_output_overwrites_what_the_replay_reads(tmp_path: Path, flags: list[str], written: str) -> None:
    """One replay checked its outputs against the recording alone: ``--summary a.txt`` wrote the summary over
    the transcript it had just read, and a scenario file or the tools' source went the same way."""
    (tmp_path / "a.wav").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "a.txt").write_text("hello\nstop\n")
    (tmp_path / "s.toml").write_bytes((ROOT / "realtime" / "server" / "scenarios" / "long.toml").read_bytes())
    (tmp_path / "mytools.py").write_text("from voxline.session.tools import ToolRegistry\nregistry = ToolRegistry()\n")
    before = (tmp_path / written).read_bytes()
    run = subprocess.run([str(VOXLINE), "replay", "a.wav", "--local", "--fast", "--voice", "tone", *flags],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    line = one_line_error(run)
    assert run.returncode == 2 and f"{written} is the input " in line and "inputs are never overwritten" in line
    assert (tmp_path / written).read_bytes() == before


@pytest.mark.slow
def test_recordings_of_one_name_from_two_folders_run_and_one_given_twice_exits_2(tmp_path: Path) -> None:
    """``voxline replay a/same.wav b/same.wav --out-dir o`` was refused, exit 1, where --help promises NAME made
    safe and unique; the same file named twice, a command line that cannot work, exited 1 too."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        make_recording(tmp_path / folder / "same.wav", 1, False)
    run = voxline("replay", "b/same.wav", "a/same.wav", "--fast", "--voice", "tone", "--out-dir", "o", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert [(r["name"], Path(r["input"]).parent.name, Path(r["heard"]).parent.name) for r in rows] == [
        ("same", "a", "same"), ("same-2", "b", "same-2")]
    run = voxline("replay", "a/same.wav", "./a/same.wav", "--fast", "--out-dir", "o2", cwd=tmp_path)
    assert run.returncode == 2 and "a/same.wav is given twice; give each recording once" in one_line_error(run)
    assert not (tmp_path / "o2").exists()


@pytest.mark.parametrize(("scenario", "said"), [("a.wav", "scenario a.wav is not UTF-8 text"),
                                                ("a.txt", "scenario a.txt is not valid TOML")],
                         ids=["the recording", "its sidecar"])
def test_a_scenario_that_is_an_input_is_read_and_its_own_fault_is_named(tmp_path: Path, scenario: str,
                                                                         said: str) -> None:
    """``--scenario a.wav``, the recording itself, was refused as an output over an input ("inputs are never
    overwritten"), for a file that is only read: what is wrong with it is that it is no scenario."""
    from voxline.session.cli.paths import check_paths

    (tmp_path / "a.wav").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "a.txt").write_text("hello\nstop\n")
    check_paths([tmp_path / "a.wav", tmp_path / "a.txt", tmp_path / scenario], [tmp_path / "h.wav"])
    run = subprocess.run([str(VOXLINE), "replay", "a.wav", "--local", "--fast", "--voice", "tone", "--scenario",
                          scenario, "--out", "h.wav", "--events", "e.jsonl"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    line = one_line_error(run)
    assert run.returncode == 1 and said in line and "never overwritten" not in line, line


def test_folders_are_unique_and_never_a_file_the_farm_writes() -> None:
    placed = assign_folders([rec("a b"), rec("a_b"), rec("A_B"), rec("results.jsonl"), rec("..")],
                            taken=["results.jsonl", "junit.xml"])
    assert [r.folder for r in placed] == ["a_b", "a_b-2", "A_B-3", "results.jsonl-2", "_.."]


def test_no_output_may_be_an_input_or_another_output(tmp_path: Path) -> None:
    recordings = assign_folders([rec("a", str(tmp_path / "a.wav"))])
    manifest = tmp_path / "farm.toml"
    with pytest.raises(ConfigurationError, match="is the input"):
        check_outputs(recordings, tmp_path / "out", [manifest], [manifest])
    with pytest.raises(ConfigurationError, match="is the input"):
        check_outputs(recordings, tmp_path / "out", [tmp_path / "a.wav"], [])
    with pytest.raises(ConfigurationError, match="written twice"):
        check_outputs(recordings, tmp_path / "out", [tmp_path / "r.xml", tmp_path / "x" / ".." / "r.xml"], [])
    with pytest.raises(ConfigurationError, match="written twice"):  # results inside a recording's folder
        check_outputs(recordings, tmp_path / "out", [tmp_path / "out" / "a" / "heard.wav"], [])
    check_outputs(recordings, tmp_path / "out", [tmp_path / "out" / "results.jsonl"], [manifest])


def voxline(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VOXLINE), *args], cwd=cwd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_recordings_named_dots_or_like_an_output_stay_inside_the_out_dir(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    make_recording(calls / "...wav", 1, False)  # its stem is ".."
    make_recording(calls / "results.jsonl.wav", 2, False)  # its stem is the results file's name
    # named one by one: a directory's hidden files (a name that begins with a dot) are not its recordings
    run = voxline("replay", "calls/...wav", "calls/results.jsonl.wav", "--fast", "--voice", "tone", "--out-dir",
                  "work/out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in (tmp_path / "work" / "out" / "results.jsonl").read_text().splitlines()]
    assert {r["name"]: Path(r["heard"]).parent.name for r in rows} == {"..": "_..", "results.jsonl": "results.jsonl-2"}
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["out"]  # nothing written beside it
    for r in rows:
        assert Path(r["heard"]).resolve().is_relative_to((tmp_path / "work" / "out").resolve())


@pytest.mark.slow
def test_a_manifest_name_of_dots_stays_inside_and_outputs_never_overwrite_inputs(tmp_path: Path) -> None:
    make_recording(tmp_path / "a.wav", 1, False)
    (tmp_path / "farm.toml").write_text('[[recording]]\npath = "a.wav"\nname = ".."\n')
    run = voxline("replay", "--manifest", "farm.toml", "--fast", "--voice", "tone", "--out-dir", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "_.." / "heard.wav").is_file() and not (tmp_path / "heard.wav").exists()
    before = (tmp_path / "farm.toml").read_bytes(), (tmp_path / "a.wav").read_bytes()
    for flag, target, said in (("--results", "farm.toml", "inputs are never overwritten"),
                               ("--junit", "farm.toml", "inputs are never overwritten"),
                               ("--junit", "a.wav", "name it other than 'a.wav'"),  # refused as a .wav name, first
                               ("--results", "./a.wav", "name it other than './a.wav'")):
        run = voxline("replay", "--manifest", "farm.toml", "--fast", "--out-dir", "out", flag, target, cwd=tmp_path)
        assert said in one_line_error(run) and run.returncode == 2  # the flags' clash
    run = voxline("replay", "--manifest", "farm.toml", "--fast", "--out-dir", "out", "--results", "r.xml", "--junit",
                  "r.xml", cwd=tmp_path)
    assert "would be written twice" in one_line_error(run) and run.returncode == 2
    assert ((tmp_path / "farm.toml").read_bytes(), (tmp_path / "a.wav").read_bytes()) == before


def _readme_block(after: str, lang: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(after)
    match = re.compile(rf"```{lang}\n(.*?)```", re.S).search(text, start)
    assert match is not None, f"no {lang} block after {after!r}"
    return match.group(1)


def _fresh_tree(root: Path, cwd: Path | None = None) -> None:
    """What the README's commands expect: calls/*.wav, and farm.toml as the README shows it, with its tools
    importable from the working directory ``cwd`` (default ``root``)."""
    (root / "calls").mkdir(parents=True)
    make_recording(root / "calls" / "refund.wav", 1, True)
    make_recording(root / "calls" / "chatty.wav", 2, True)
    (root / "farm.toml").write_text(_readme_block("A\nmanifest lists recordings", "toml"), encoding="utf-8")
    (cwd or root).mkdir(parents=True, exist_ok=True)
    (cwd or root).joinpath("mytools.py").write_text("from voxline import ToolRegistry\nregistry = ToolRegistry()\n",
                                                    encoding="utf-8")


def _run_line(line: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[0] == "voxline"
    import os

    return subprocess.run([str(VOXLINE), *argv[1:], "--voice", "tone"], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_the_readme_farm_ci_matrix_and_kubernetes_lines_work_verbatim_on_a_fresh_tree(tmp_path: Path) -> None:
    farm = _readme_block("## Replay farms", "bash").splitlines()[0].split("  #")[0].strip()
    assert farm == "voxline replay calls/ --fast --out-dir out/ --junit out/junit.xml"
    tree = tmp_path / "farm"
    _fresh_tree(tree)
    run = _run_line(farm, tree)
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr  # verdicts decide, not paths
    assert "farm: 2 recordings" in run.stdout and (tree / "out" / "junit.xml").is_file() and (tree / "out" / "results.jsonl").is_file()

    matrix = _readme_block("A CI matrix", "yaml")
    line = re.search(r"- run: (voxline .*)", matrix)
    assert line is not None
    tree = tmp_path / "matrix"
    _fresh_tree(tree)
    for shard in (0, 3):  # as the CI system expands ${{ matrix.shard }}
        run = _run_line(line.group(1).replace("${{ matrix.shard }}", str(shard)), tree)
        assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr
        assert "farm: " in run.stdout and (tree / "out" / f"junit-{shard}.xml").is_file(), run.stderr

    job = _readme_block("Kubernetes Indexed Job", "yaml")
    args = re.search(r"args: (\[.*?\])", job, re.S)
    assert args is not None
    argv = json.loads(args.group(1))
    tree = tmp_path / "pod"
    _fresh_tree(tree / "data", cwd=tree)  # the pod's /data and /results, rooted in this test's tree
    for index in (0, 7):  # as Kubernetes expands $(JOB_COMPLETION_INDEX)
        pod = [a.replace("$(JOB_COMPLETION_INDEX)", str(index)) for a in argv]
        pod = [str(tree) + a if a.startswith(("/data/", "/results/")) else a for a in pod]
        run = _run_line(shlex.join(pod), tree)
        assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr
        assert "farm: " in run.stdout and (tree / "results" / str(index) / "junit.xml").is_file(), run.stderr
