"""One rule for keys and servers in every command, usage errors that exit 2 and say what was meant,
and the channels of a recording: each test runs the installed ``voxline`` as a user does."""

from __future__ import annotations

import os
import re
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.support.cli import EXAMPLE, VOXLINE, one_line_error
from voxline.audio.wavio import read_wav

pytestmark = pytest.mark.slow  # each test runs the installed voxline command

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-test-usage-not-a-real-key"


def run(*args: str, env: dict[str, str] | None = None, pythonpath: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("VOXLINE_") and k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    if pythonpath is not None:
        clean["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([str(VOXLINE), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})})


def outputs(tmp_path: Path) -> list[str]:
    return ["--out", str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl")]


@pytest.fixture
def no_sound_devices(tmp_path: Path) -> tuple[Path, Path]:
    """A ``sounddevice`` that leaves a mark and fails: ``talk`` got past its settings when the mark is there."""
    fake = tmp_path / "fake"
    fake.mkdir()
    marker = tmp_path / "devices-opened"
    (fake / "sounddevice.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise OSError('no PortAudio here')\n")
    return fake, marker


# --- keys: empty is unset, --local is the built-in server whatever the environment says


@pytest.mark.parametrize("command", ["talk", "replay"])
def test_an_empty_key_is_unset_in_every_command(tmp_path: Path, command: str) -> None:
    args = [str(EXAMPLE), *outputs(tmp_path)] if command == "replay" else ["--exit-after", "5", "--no-ui"]
    result = run(command, *args, "--url", "wss://realtime.example.invalid/v1",
                 env={"OPENAI_API_KEY": "", "VOXLINE_API_KEY": ""}, timeout=60)
    assert "OPENAI_API_KEY is not set" in one_line_error(result)


def test_talk_with_an_empty_key_uses_the_built_in_server(no_sound_devices: tuple[Path, Path]) -> None:
    fake, marker = no_sound_devices
    result = run("talk", "--scenario", "long", "--exit-after", "5", "--no-ui", env={"OPENAI_API_KEY": ""},
                 pythonpath=fake)
    assert "apply to the built-in server only" not in result.stderr, result.stderr
    assert marker.exists(), result.stderr  # settings accepted: on to the sound devices


def test_talk_local_uses_the_built_in_server_with_a_key_exported(no_sound_devices: tuple[Path, Path]) -> None:
    fake, marker = no_sound_devices
    env = {"OPENAI_API_KEY": KEY}
    refused = run("talk", "--scenario", "long", "--exit-after", "5", "--no-ui", env=env, pythonpath=fake)
    assert "apply to the built-in server only" in one_line_error(refused) and not marker.exists()
    local = run("talk", "--local", "--scenario", "long", "--exit-after", "5", "--no-ui", env=env, pythonpath=fake)
    assert "apply to the built-in server only" not in local.stderr and marker.exists(), local.stderr
    assert KEY not in local.stderr + local.stdout


def test_replay_local_ignores_the_environment(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": KEY, "VOXLINE_URL": "wss://realtime.example.invalid/v1"}
    result = run("replay", str(EXAMPLE), "--local", "--fast", "--scenario", "long", *outputs(tmp_path), env=env)
    assert result.returncode == 0, result.stderr
    assert "scenario 'long'" in result.stderr and "barge-in" in result.stdout


def test_local_and_a_url_exclude_each_other(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), "--local", "--url", "ws://127.0.0.1:9/v1", *outputs(tmp_path))
    assert result.returncode == 2
    assert "--local runs against the built-in server; drop --url or --local" in one_line_error(result)


# --- usage errors: exit 2, and say what was meant


@pytest.mark.parametrize("command", ["replay", "talk"])
def test_a_url_without_a_scheme_is_named_so(tmp_path: Path, command: str) -> None:
    args = [str(EXAMPLE), *outputs(tmp_path)] if command == "replay" else []
    result = run(command, *args, "--url", "127.0.0.1:8765", timeout=60)
    line = one_line_error(result)
    assert result.returncode == 2
    assert "--url 127.0.0.1:8765 is a URL without a scheme; did you mean ws://127.0.0.1:8765?" in line
    assert "OPENAI_API_KEY" not in line


def test_a_variable_url_without_a_scheme_is_named_so(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), *outputs(tmp_path), env={"VOXLINE_URL": "api.openai.com/v1"})
    assert "VOXLINE_URL api.openai.com/v1 is a URL without a scheme; did you mean wss://api.openai.com/v1?" in (
        one_line_error(result))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["replay"], "give a recording (INPUT.wav)"),
        (["replay", str(EXAMPLE), "--silence-ms", "-5", "--out", "h.wav", "--events", "e.jsonl"], "--silence-ms=-5"),
        (["replay", str(EXAMPLE), "--fast", "--url", "ws://127.0.0.1:9/v1", "--out", "h.wav", "--events", "e.jsonl"],
         "--fast runs against the built-in server only, and --url names a server; drop --url or drop --fast"),
        (["replay", str(EXAMPLE), "--fast", "--transport", "carrier-pigeon"], "invalid choice"),  # argparse's own
        (["replay", str(EXAMPLE.parent), "--fast", "--out-dir", "o", "--shard", "9/4"], "--shard 9/4: I must be 0 to 3"),
        # a value with a dash and a digit that is no plain number (before: argparse's "expected one argument")
        (["replay", str(EXAMPLE.parent), "--fast", "--out-dir", "o", "--shard", "-1/4"],
         "--shard takes I/N with 0 <= I < N (0-based, e.g. 0/4), not '-1/4'"),
        (["talk", "--local", "--exit-after", "-1e3"], "argument --exit-after: expected a positive number of seconds"),
        (["replay", str(EXAMPLE), "--fast", "--junit", "j.xml"], "--junit makes a farm, which needs --out-dir DIR"),
        (["token", "--url", "ftp://127.0.0.1:9/v1"], "--url must be an http(s):// or ws(s):// URL"),
        (["replay", str(EXAMPLE), "--fast", "--tools", "mytools", "--out", "h.wav", "--events", "e.jsonl"],
         "argument --tools: takes MODULE:ATTR (e.g. mytools:registry), not 'mytools'"),
        (["serve", "--voice", "robot"], "voxline serve: error: unknown voice 'robot'"),
        (["replay", str(EXAMPLE), "--fast", "--scenario", "nosuch", "--out", "h.wav", "--events", "e.jsonl"],
         "unknown scenario 'nosuch'; built-in: default"),  # as serve says it, and with the same status
        (["replay", str(EXAMPLE.parent), "--fast", "--scenario", "nosuch", "--out-dir", "o"],
         "unknown scenario 'nosuch'; built-in: default"),  # and so does a farm
        # flags that would be taken and do nothing (before: accepted in silence)
        (["replay", str(EXAMPLE), "--fast", "--grace-ms", "300", "--out", "h.wav", "--events", "e.jsonl"],
         "--grace-ms sets how the local VAD holds the assistant; add --local-vad, or drop it"),
        (["replay", str(EXAMPLE), "--fast", "--grace-ms", "300", "--no-resume", "--out", "h.wav", "--events", "e.jsonl"],
         "--grace-ms and --no-resume set how the local VAD holds the assistant; add --local-vad, or drop them"),
        (["replay", str(EXAMPLE.parent), "--fast", "--no-resume", "--out-dir", "o"], "--no-resume applies to a single replay"),
        (["talk", "--local", "--input-device", ""], "--input-device='': is blank: give a name, or leave it out"),
        (["talk", "--local", "--output-device", " "], "--output-device=' ': is blank: give a name, or leave it out"),
        (["replay", str(EXAMPLE), "--fast", "--model", "", "--out", "h.wav", "--events", "e.jsonl"],
         "--model='': names no model: give a model's name, or leave it out for the default"),
        # an empty path or name (before: taken as the current directory, "cannot write .")
        (["replay", str(EXAMPLE), "--fast", "--out", "", "--events", "e.jsonl"],
         "argument --out: takes a path, not an empty string"),
        (["replay", str(EXAMPLE.parent), "--fast", "--out-dir", ""], "argument --out-dir: takes a path, not an empty string"),
        (["replay", str(EXAMPLE), "--fast", "--scenario", "", "--out", "h.wav", "--events", "e.jsonl"],
         "a scenario takes a built-in name (default, "),
        (["serve", "--transcripts", ""], "argument --transcripts: takes a path, not an empty string"),
        (["replay", str(EXAMPLE), "--fast", "--out", " ", "--events", "e.jsonl"],  # before: a file named ' '
         "argument --out: takes a path, not ' ', which is blank"),
        (["replay", str(EXAMPLE.parent), "--fast", "--out-dir", "o", "--junit", "out/r1/"],  # before: a file 'r1'
         "argument --junit: takes a file, not 'out/r1/', which names a folder (it ends in /)"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    args = [str(tmp_path / a) if a in ("h.wav", "e.jsonl", "o", "j.xml") else a for a in args]
    result = run(*args, env={"OPENAI_API_KEY": "sk-usage-test"} if args[0] == "token" else None)
    line = one_line_error(result)
    assert result.returncode == 2 and expected in line, line
    if args[0] != "serve":  # the server's own errors say what to change without pointing at --help
        assert line.endswith(f"(see voxline {args[0]} --help)")


@pytest.mark.parametrize("flags", [["--fast", "--out-dir"], ["--out-dir"], ["--fast", "--junit", "j.xml", "--out-dir"]],
                         ids=["fast", "real time", "junit"])
def test_a_farm_given_no_recordings_is_a_usage_error_and_writes_nothing(tmp_path: Path, flags: list[str]) -> None:
    """A CI job whose list of recordings expanded to nothing (``voxline replay $FILES --out-dir o``) ran a farm of
    no recordings, wrote an empty results.jsonl and exited 0: the job went green having judged nothing."""
    args = [str(tmp_path / a) if a == "j.xml" else a for a in flags]
    result = run("replay", *args, str(tmp_path / "o"))
    line = one_line_error(result)
    assert result.returncode == 2 and "give a recording (INPUT.wav), several, a directory or --manifest FILE" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("flags", "said"), [
    (["--out", "h.wav", "--events", "e.wav"], "argument --events: writes JSON lines, not audio"),
    (["--out", "h.wav", "--events", "e.jsonl", "--summary", "s.WAV"], "argument --summary: writes JSON, not audio"),
    (["--out", "h.wav", "--events", "e.jsonl", "--report", "r.wav"], "argument --report: writes an HTML page, not"),
    (["--out-dir", "o", "--results", "r.wav"], "argument --results: writes JSON lines, not audio"),
    (["--out-dir", "o", "--junit", "j.wave"], "argument --junit: writes XML, not audio"),
], ids=["events", "summary", "report", "results", "junit"])
def test_a_document_named_like_a_recording_is_a_usage_error(tmp_path: Path, flags: list[str], said: str) -> None:
    """``--events o/e.wav`` wrote JSON lines into a .wav name, which a later farm of that folder took for a
    recording (and refused as no WAV file)."""
    args = [str(tmp_path / a) if "." in a or a == "o" else a for a in flags]
    result = run("replay", str(EXAMPLE), "--fast", "--voice", "tone", *args)
    line = one_line_error(result)
    assert result.returncode == 2 and said in line and "a farm of its folder would take a .wav" in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["replay", "serve"])
def test_a_scenario_file_that_is_no_scenario_exits_1_as_any_file_of_the_wrong_kind(tmp_path: Path, command: str) -> None:
    """What a file holds is not the command line's fault: 1, as a manifest or a WAV of the wrong kind. Before,
    replay and a farm exited 2 for it, as for a mistyped name."""
    scenario = tmp_path / "notes.txt"
    scenario.write_text("hello", encoding="utf-8")
    args = ["--port", "0"] if command == "serve" else [str(EXAMPLE), "--fast", "--out", str(tmp_path / "h.wav"),
                                                        "--events", str(tmp_path / "e.jsonl")]
    result = run(command, *args, "--scenario", str(scenario))
    assert result.returncode == 1 and "is not valid TOML" in one_line_error(result)


@pytest.mark.parametrize(("manifest", "expected"), [
    ('[[recording]]\npath = "a.wav"\nscenario = "nosuch"\n', "a: scenario: unknown scenario 'nosuch'; built-in: default"),
    ('[defaults]\nscenario = "nosuch"\n[[recording]]\npath = "a.wav"\n', "a: scenario: unknown scenario 'nosuch'"),
    ('[[recording]]\npath = "a.wav"\ntools = "nosuchmodule:registry"\n', "a: tools: cannot import 'nosuchmodule'"),
])
def test_a_manifests_scenario_or_tools_that_cannot_load_names_the_manifest_and_the_recording(
        tmp_path: Path, manifest: str, expected: str) -> None:
    """Before: the scenario's error named neither the manifest nor the recording, the tools' not the manifest."""
    (tmp_path / "a.wav").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "farm.toml").write_text(manifest, encoding="utf-8")
    result = run("replay", "--manifest", str(tmp_path / "farm.toml"), "--fast", "--out-dir", str(tmp_path / "o"))
    line = one_line_error(result)
    assert result.returncode == 1 and line.startswith(f"voxline replay: error: manifest {tmp_path / 'farm.toml'}: "
                                                      f"{expected}"), line


def test_a_key_in_a_misplaced_argument_is_redacted_in_the_usage_line() -> None:
    """argparse quotes what it could not place: a URL with a key given where no argument goes was printed whole."""
    url = "wss://u:sk-canaryI9xx@api.example.com/v1?api-key=canaryJ0xx"
    result = run("token", url)
    line = one_line_error(result)
    assert result.returncode == 2 and "unrecognized arguments" in line, line
    assert "canaryI9xx" not in line and "canaryJ0xx" not in line and "[redacted]" in line
    # where recordings go, the URL is taken for one, and the file it names is not found
    result = run("replay", str(EXAMPLE), "--fast", url, "--out-dir", "out")
    line = one_line_error(result)
    assert result.returncode == 1 and "no such file" in line.lower(), line
    assert "canaryI9xx" not in line and "canaryJ0xx" not in line and "[redacted]" in line


def test_a_bad_ttl_is_said_before_a_missing_key() -> None:
    result = run("token", "--ttl", "5", "--url", "https://api.example.invalid/v1",
                 env={"OPENAI_API_KEY": "", "VOXLINE_API_KEY": ""})
    line = one_line_error(result)
    assert result.returncode == 2 and "--ttl must be between 10 and 7200 seconds, not 5" in line, line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["replay", "--fsat"], "unknown option --fsat; did you mean --fast?"),
        (["talk", "--push-to-tlak"], "unknown option --push-to-tlak; did you mean --push-to-talk?"),
        (["rpelay"], "invalid choice: 'rpelay' (choose from serve, talk, replay, devices, token); "
                     "did you mean replay?"),
        (["--verbsoe"], "unknown option --verbsoe; did you mean --verbose?"),
    ],
)
def test_a_mistyped_option_or_command_gets_the_closest_one(args: list[str], expected: str) -> None:
    result = run(*args)
    assert result.returncode == 2 and expected in one_line_error(result)


def test_nothing_close_suggests_nothing() -> None:
    assert "did you mean" not in one_line_error(run("replay", "--zzzzzz"))


# --- the channels of a recording, and what HEARD.wav lines up with


def _stereo(path: Path, left: np.ndarray, right: np.ndarray, rate: int) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.column_stack([left, right]).astype("<i2").tobytes())
    return path


@pytest.fixture
def speech_left(tmp_path: Path) -> Path:
    speech, rate = read_wav(EXAMPLE)
    return _stereo(tmp_path / "stereo.wav", speech, np.zeros_like(speech), rate)


def test_a_stereo_input_says_how_it_was_mixed(tmp_path: Path, speech_left: Path) -> None:
    result = run("replay", str(speech_left), "--fast", *outputs(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"voxline: {speech_left}: 2 channels, averaged to mono (--channel left|right|N|mix picks)" in result.stderr


@pytest.mark.parametrize(("channel", "speech"), [("left", True), ("1", True), ("right", False), ("2", False)])
def test_channel_picks_one_channel(tmp_path: Path, speech_left: Path, channel: str, speech: bool) -> None:
    result = run("replay", str(speech_left), "--fast", "--channel", channel, *outputs(tmp_path))
    assert result.returncode == 0, result.stderr
    number = 1 if channel in ("left", "1") else 2
    assert f"2 channels, using channel {number} only" in result.stderr
    assert ("barge-in" in result.stdout) is speech and ("no speech detected" in result.stderr) is not speech


@pytest.mark.parametrize(("channel", "expected"), [
    ("3", "--channel 3: {path} has 2 channels"),
    ("centre", "--channel takes left, right, a channel number from 1, or mix, not 'centre'"),
    ("0", "--channel takes left, right, a channel number from 1, or mix, not '0'"),
])
def test_a_channel_the_file_lacks_is_a_usage_error(tmp_path: Path, speech_left: Path, channel: str,
                                                   expected: str) -> None:
    result = run("replay", str(speech_left), "--fast", "--channel", channel, *outputs(tmp_path))
    assert result.returncode == 2 and expected.format(path=speech_left) in one_line_error(result)


def test_heard_wav_alignment_is_stated_for_any_input_rate() -> None:
    help_text = " ".join(run("replay", "--help").stdout.split())
    assert ("its sample n is what was heard n/24000 s into the input (input sample n for a 24 kHz input; an input "
            "at another rate is resampled, its sample m lines up with HEARD.wav sample m*24000/rate)") in help_text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "sample *n* is what the listener heard *n*/24000 s into the input" in readme
    assert "sample *n* is what the listener heard when input sample *n* was captured" not in readme


def test_a_resampled_input_says_where_its_samples_land(tmp_path: Path) -> None:
    speech, _rate = read_wav(EXAMPLE)
    low = tmp_path / "8k.wav"
    with wave.open(str(low), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8_000)
        out.writeframes(speech[::3].astype("<i2").tobytes())  # 24 kHz to 8 kHz, roughly
    result = run("replay", str(low), "--fast", *outputs(tmp_path))
    assert result.returncode == 0, result.stderr
    assert re.search(r"resampling .* from 8000 Hz to 24000 Hz \(its sample m lines up with HEARD.wav sample "
                     r"m\*24000/8000\)", result.stderr), result.stderr


def test_a_farm_refuses_channel(tmp_path: Path, speech_left: Path) -> None:
    result = run("replay", str(speech_left), str(EXAMPLE), "--fast", "--channel", "left", "--out-dir",
                 str(tmp_path / "farm"))
    assert result.returncode == 2 and "--channel applies to a single replay" in one_line_error(result)


def test_inputs_may_follow_options(tmp_path: Path, speech_left: Path) -> None:
    """``replay a.wav --fast b.wav`` takes both recordings (a farm, which refuses --channel), as most tools do."""
    result = run("replay", str(speech_left), "--fast", str(EXAMPLE), "--channel", "left", "--out-dir",
                 str(tmp_path / "farm"))
    assert result.returncode == 2 and "--channel applies to a single replay" in one_line_error(result)


def test_a_reader_that_goes_away_ends_the_command_without_a_word(tmp_path: Path) -> None:
    """``voxline … | head``: once the reader has closed the pipe, no 'Broken pipe' error and no traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command prints its first line
    try:
        result = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", *outputs(tmp_path)],
                                cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Broken pipe" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1


def test_a_server_whose_banner_nobody_reads_ends_without_blaming_the_listen() -> None:
    """``voxline serve | true``: the banner's write fails; that is not a failure to listen, and says nothing."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run([str(VOXLINE), "serve", "--host", "127.0.0.1", "--port", "0"], cwd=ROOT, stdout=write,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "cannot listen" not in result.stderr and "Broken pipe" not in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr


def test_junit_with_a_single_replays_report_says_that_junit_made_a_farm(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), "--fast", "--junit", str(tmp_path / "j.xml"), "--report",
                 str(tmp_path / "r.html"), "--out-dir", str(tmp_path / "o"))
    assert result.returncode == 2
    assert one_line_error(result).startswith("voxline replay: error: --junit makes a farm, even of one recording, and "
                                             "--report applies to a single replay;")


def test_a_negative_grace_is_refused_with_or_without_a_local_vad(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), "--fast", "--grace-ms", "-1", *outputs(tmp_path))
    assert result.returncode == 2 and "--grace-ms takes milliseconds >= 0, not -1" in one_line_error(result)


def test_a_farm_output_it_could_not_write_is_refused_before_any_recording_runs(tmp_path: Path) -> None:
    second = tmp_path / "second.wav"
    second.write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "afile").write_text("")
    for flag, path, expected in (
            ("--results", "/proc/r.jsonl", "--results /proc/r.jsonl: No such file or directory"),
            ("--junit", "/proc/j.xml", "--junit /proc/j.xml: No such file or directory"),
            ("--results", str(tmp_path / "afile" / "r.jsonl"),
             f"--results {tmp_path / 'afile' / 'r.jsonl'}: cannot make its folder {tmp_path / 'afile'} (File exists)")):
        result = run("replay", str(EXAMPLE), str(second), "--fast", "--out-dir", str(tmp_path / "out" / "new"), flag,
                     path)
        assert (result.returncode, one_line_error(result)) == (1, f"voxline replay: error: {expected}")
        assert "farm of" not in result.stderr  # refused before it started
        assert not (tmp_path / "out").exists()  # before, the --out-dir it made stayed behind, empty


@pytest.mark.parametrize("flag", ["--out", "--summary", "--stereo-out"])
def test_an_output_on_a_file_system_that_takes_no_file_is_refused_before_the_replay_runs(tmp_path: Path,
                                                                                          flag: str) -> None:
    """Permissions say /proc may be written (by root); only trying tells (before: the replay ran, then failed, and
    left an empty events file behind)."""
    target = "/proc/voxline-out.wav" if flag != "--summary" else "/proc/voxline-summary.json"
    given = {"--out": tmp_path / "h.wav", "--events": tmp_path / "e.jsonl", flag: target}
    result = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone",
                             *(str(part) for pair in given.items() for part in pair)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr.splitlines()) == (
        1, [f"voxline replay: error: cannot write {target}: No such file or directory"])
    assert result.stdout == "" and list(tmp_path.iterdir()) == []  # nothing ran, nothing was touched


def test_a_replay_whose_server_calls_tools_without_a_registry_says_how_to_give_one(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), "--fast", "--scenario", "tools", "--voice", "tone", *outputs(tmp_path))
    assert result.returncode == 0, result.stderr
    assert ("voxline: the server called tools and nothing ran them (each was answered 'unknown tool'): give a "
            "ToolRegistry with --tools MODULE:ATTR") in result.stderr.splitlines()
    plain = run("replay", str(EXAMPLE), "--fast", "--voice", "tone", *outputs(tmp_path))
    assert plain.returncode == 0 and "nothing ran them" not in plain.stderr


def test_a_live_replay_without_a_transcript_says_why_no_words_are_shown(tmp_path: Path) -> None:
    result = run("replay", str(EXAMPLE), "--fast", "--api", "live", "--voice", "tone", *outputs(tmp_path))
    assert result.returncode == 0, result.stderr
    # Live tells of the user's words only in its input transcript; its detector did fire (the replies played)
    assert (f"voxline: no words of yours to show from {EXAMPLE}: the server sent no input transcript (the built-in "
            f"server transcribes only the turns barge_in.txt scripts)") in result.stderr.splitlines()


@pytest.mark.slow  # real time against a `voxline serve`
def test_a_live_replay_against_a_local_serve_without_transcripts_says_how_to_give_them(tmp_path: Path) -> None:
    from voxline.audio.wavio import write_wav

    quiet = tmp_path / "quiet.wav"
    write_wav(quiet, np.zeros(24_000, np.int16))
    server = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = re.search(r"at (ws://\S+/v1)/realtime ", server.stdout.readline())
        assert url is not None
        result = run("replay", str(quiet), "--api", "live", "--url", url.group(1),
                     *outputs(tmp_path), env={"OPENAI_API_KEY": "sk-local"})
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert result.returncode == 0, result.stderr
    assert (f"voxline: no words of yours to show from {quiet}: the server sent no input transcript (if it is `voxline "
            f"serve`, start it with --transcripts quiet.txt)") in result.stderr.splitlines()


def test_a_farm_writes_its_results_into_a_pipe_it_did_not_open_to_check(tmp_path: Path) -> None:
    import threading

    second = tmp_path / "second.wav"
    second.write_bytes(EXAMPLE.read_bytes())
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = run("replay", str(EXAMPLE), str(second), "--fast", "--voice", "tone", "--out-dir", str(tmp_path / "out"),
                 "--results", str(fifo), timeout=120)  # before, the check's open ended the reader's input: a hang
    reader.join(10)
    assert result.returncode == 0, result.stderr
    assert got and len(got[0].splitlines()) == 2


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "real-time"])
def test_an_espeak_that_fails_is_one_line_and_the_last_runs_files_stay(tmp_path: Path, fast: bool) -> None:
    """Before, a failing espeak-ng was a traceback (its error was no VoxlineError), and a --fast replay had
    already emptied the last run's heard.wav and events.jsonl, though nothing ran."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "espeak-ng").write_text("#!/bin/sh\necho 'espeak-ng-data: No such file or directory' >&2\nexit 1\n")
    (fake / "espeak-ng").chmod(0o755)
    heard, events = tmp_path / "h.wav", tmp_path / "e.jsonl"
    heard.write_bytes(b"the last run's audio")
    events.write_text('{"the": "last run"}\n')
    result = run("replay", str(EXAMPLE), *(["--fast"] if fast else []), "--voice", "espeak", *outputs(tmp_path),
                 env={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert result.returncode == 1, result.stderr
    said = result.stderr.strip().splitlines()  # --fast first says what it replays against
    assert said[-1].startswith("voxline replay: error: espeak-ng cannot speak with voice 'en-us': espeak-ng-data")
    assert len(said) == (2 if fast else 1) and "Traceback" not in result.stderr, result.stderr
    assert heard.read_bytes() == b"the last run's audio" and events.read_text() == '{"the": "last run"}\n'


def test_a_folder_flag_takes_a_trailing_slash_as_the_readme_writes_it(tmp_path: Path) -> None:
    """--out-dir out/ (as the README has it, and as a shell completes it) is a folder; only file flags refuse a slash."""
    result = run("replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out-dir", f"{tmp_path / 'out'}/")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.parametrize("model", ["", "   "])
def test_a_token_for_no_model_is_refused_here_not_by_the_server(model: str) -> None:
    """Before, an empty --model went to the server, whose refusal named another mistake ("The model of a session
    cannot be changed")."""
    import argparse
    import asyncio

    from voxline.session.cli import secret
    from voxline.session.settings import UsageError

    args = argparse.Namespace(ttl=600, url="http://127.0.0.1:9/v1", model=model)
    with pytest.raises(UsageError, match=r"^--model='\s*': names no model: give a model's name, or leave it out"):
        asyncio.run(secret.run(args))  # refused before anything is sent: nothing listens at :9
