"""What ``voxline`` does with what a user hands it: files, flags and ``VOXLINE_*`` variables.

Every test runs the installed ``voxline`` executable, as a user does.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import read_wav, write_wav

pytestmark = pytest.mark.slow  # each test runs the installed voxline command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "audio" / "barge_in.wav"
VOXLINE = Path(sys.executable).parent / "voxline"


def voxline(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    return subprocess.run([str(VOXLINE), *args], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env={**clean, **(env or {})})


def one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def fast(tmp_path: Path, source: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return voxline("replay", str(source), "--fast", "--voice", "tone", "--out", str(tmp_path / "heard.wav"),
                   "--events", str(tmp_path / "events.jsonl"), *extra, env=env)


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "events on the input"])
def test_an_input_is_never_overwritten(tmp_path: Path, how: str) -> None:
    source = tmp_path / "short.wav"
    source.write_bytes(EXAMPLE.read_bytes())
    out, events = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    match how:
        case "same path":
            out = source
        case "symlink":
            out.symlink_to(source)
        case "hard link":
            os.link(source, out)
        case "events on the input":
            events = Path(os.path.relpath(source, ROOT))
    run = voxline("replay", str(source), "--fast", "--out", str(out), "--events", str(events))
    line = one_line_error(run)
    if how == "events on the input":  # a .wav name for the events is refused first, as a recording's name
        assert "--events: writes JSON lines, not audio: name it other than" in line and run.returncode == 2
    else:
        assert "is the input" in line and "never overwritten" in line and run.returncode == 2
    assert source.read_bytes() == EXAMPLE.read_bytes()


@pytest.mark.parametrize(("flag", "name"), [("--out", "heard.mp3"), ("--stereo-out", "both.flac")])
def test_a_wav_output_named_as_another_format_is_refused(tmp_path: Path, flag: str, name: str) -> None:
    run = voxline("replay", str(EXAMPLE), "--fast", flag, str(tmp_path / name))
    assert run.returncode == 2
    assert f"{flag} writes a WAV file (16-bit PCM); name it .wav, not {name}" in one_line_error(run)
    assert list(tmp_path.iterdir()) == []


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    same = tmp_path / "both"
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(same), "--events", str(same))
    assert "named for two outputs" in one_line_error(run) and run.returncode == 2  # as any flags that exclude each other


def test_every_output_may_be_discarded_at_once() -> None:
    run = voxline("replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out", os.devnull, "--events", os.devnull)
    assert run.returncode == 0, run.stderr
    assert f"wrote {os.devnull} (" in run.stdout


def _extensible_24bit(path: Path, samples: np.ndarray, rate: int) -> Path:
    """A 24-bit mono WAV with a WAVE_FORMAT_EXTENSIBLE header, the way sox writes one."""
    wide = (samples.astype(np.int32) << 8).astype("<i4").tobytes()
    data = b"".join(wide[i : i + 3] for i in range(0, len(wide), 4))
    guid = struct.pack("<H", 1) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
    fmt = struct.pack("<HHIIHH", 0xFFFE, 1, rate, rate * 3, 3, 24) + struct.pack("<HHI", 22, 24, 4) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def test_a_24_bit_extensible_wav_is_converted_with_a_note(tmp_path: Path) -> None:
    samples, rate = read_wav(EXAMPLE)
    source = _extensible_24bit(tmp_path / "wide.wav", samples, rate)
    run = fast(tmp_path, source)
    assert run.returncode == 0, run.stderr
    assert f"voxline: {source}: converting 24-bit integer samples to 16-bit" in run.stderr.splitlines()
    assert "barge-in (server_vad): the reply cut where it was heard" in run.stdout


def test_a_recording_without_speech_says_so(tmp_path: Path) -> None:
    silent = tmp_path / "silence.wav"
    write_wav(silent, np.zeros(24000 * 2, dtype=np.int16))
    run = fast(tmp_path, silent)
    assert run.returncode == 0, run.stderr
    assert f"voxline: no speech detected in {silent}" in run.stderr


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        (["--vad-threshold", "5"], {}, "--vad-threshold=5.0: Input should be less than or equal to 1"),
        (["--silence-ms", "-5"], {}, "--silence-ms=-5: Input should be greater than or equal to 0"),
        (["--vad-threshold", "loud"], {}, "argument --vad-threshold: invalid float value: 'loud'"),
        ([], {"VOXLINE_TRANSPORT": "bogus"}, "VOXLINE_TRANSPORT='bogus': Input should be 'ws' or 'webrtc'"),
        ([], {"VOXLINE_SILENCE_MS": "soon"}, "VOXLINE_SILENCE_MS='soon': Input should be a valid integer"),
        # honoured, not ignored: the variable asks for a transport --fast cannot use
        ([], {"VOXLINE_TRANSPORT": "webrtc"}, "it cannot use --transport webrtc"),
        ([], {"VOXLINE_URL": "ws://127.0.0.1:9/v1"},  # named as what chose the server: no --url was given
         "--fast runs against the built-in server only, and VOXLINE_URL names a server; add --local"),
        (["--bogus", "--also-bogus=1"], {}, "unknown options --bogus, --also-bogus"),
    ],
)
def test_replay_checks_every_flag_and_variable(tmp_path: Path, flags: list[str], env: dict[str, str],
                                               expected: str) -> None:
    assert expected in one_line_error(fast(tmp_path, EXAMPLE, *flags, env=env))


def test_built_in_server_options_are_refused_with_another_server(tmp_path: Path) -> None:
    run = voxline("replay", str(EXAMPLE), "--scenario", "long", "--out", str(tmp_path / "h.wav"), "--events",
                  str(tmp_path / "e.jsonl"), env={"VOXLINE_URL": "ws://127.0.0.1:9/v1"})
    assert ("--scenario and --voice apply to the built-in server only, and VOXLINE_URL names a server; add --local"
            in one_line_error(run))


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["talk"], {"VOXLINE_TRANSPORT": "bogus"}, "voxline talk: error: VOXLINE_TRANSPORT='bogus'"),
        (["talk"], {"VOXLINE_VAD_THRESHOLD": "2"}, "VOXLINE_VAD_THRESHOLD='2': Input should be less than or equal to 1"),
        (["--bogus"], {}, "voxline: error: unknown option --bogus"),
        (["serve", "--bogus"], {}, "voxline serve: error: unknown option --bogus"),
        (["serve", "--port", "70000"], {}, "argument --port: expected a port number 0..65535, not '70000'"),
        (["serve", "--max-session-minutes", "-1"], {}, "expected a finite number of minutes from 0.01 up to 10080 (a week), not '-1'"),
        (["serve", "--max-session-minutes", "1e-300"], {}, "minutes from 0.01 up to 10080 (a week), not '1e-300'"),
        (["serve", "--speed", "1e-300"], {}, "expected 'instant' or a multiple of real time of at least 0.01, not '1e-300'"),
        (["serve", "--speed", "nan"], {}, "of at least 0.01, not 'nan'"),
        (["serve", "--speed", "fast"], {}, "of at least 0.01, not 'fast'"),
        (["serve", "--close-timeout", "-2"], {}, "argument --close-timeout: expected a number of seconds above 0 and up to 600, not '-2'"),
        (["serve", "--close-timeout", "later"], {}, "argument --close-timeout: expected a number of seconds above 0"),
        (["serve", "--max-calls", "0"], {}, "argument --max-calls: expected a whole number of calls, at least 1, not '0'"),
        # keys no Authorization header could carry: the server started, and refused every request, its own key's too
        (["serve", "--port", "0", "--api-key", "k\u00e9y-12345"], {}, "api_key takes printable ASCII with no space"),
        (["serve", "--port", "0", "--api-key", "sk-abc-123 "], {}, "api_key takes printable ASCII with no space"),
        (["serve", "--port", "0", "--api-key", "sk-a\nb-123"], {}, "api_key takes printable ASCII with no space"),
        (["devices", "--log-level", "loud"], {}, "argument --log-level: invalid choice: 'loud'"),
        ([], {}, "voxline: error: give a command: serve, talk, replay, devices, token (see voxline --help)"),
        (["-v"], {}, "voxline: error: the following arguments are required: COMMAND"),
    ],
)
def test_other_commands_name_bad_values_and_unknown_options(args: list[str], env: dict[str, str],
                                                             expected: str) -> None:
    assert expected in one_line_error(voxline(*args, env=env))


@pytest.mark.parametrize("command", ["serve", "talk", "replay", "devices", "token"])
def test_every_command_takes_the_logging_flags_and_documents_every_option(command: str) -> None:
    run = voxline(command, "--help")
    assert run.returncode == 0
    assert "-v, --verbose" in run.stdout and "--log-level" in run.stdout
    from voxline.session.cli import _full_parser

    bare = [action.option_strings or action.dest for action in _full_parser(command)._actions if not action.help]
    assert bare == [], f"options without help text: {bare}"


def test_the_log_level_is_taken_as_logging_spells_it_too(tmp_path: Path) -> None:
    run = voxline("replay", str(EXAMPLE), "--fast", "--out", str(tmp_path / "h.wav"), "--events",
                  str(tmp_path / "e.jsonl"), "--log-level", "DEBUG")
    assert run.returncode == 0, run.stderr
    assert " DEBUG voxline." in run.stderr, run.stderr[:500]
