"""Killed jobs keep their results: real signals sent to real ``voxline`` processes.

SIGTERM (a CI timeout, ``docker stop``, a pod ending), SIGHUP (a closed terminal) and SIGINT
(Ctrl-C) stop a replay or a farm the same way: what ran is written and valid, a farm's
results and JUnit cover every recording (the unfinished as interrupted errors), workers end
with the command, and the exit status is 128 + the signal. SIGKILL loses at most the
in-memory window of HEARD.wav. A signal is sent once the outputs show the replay got
somewhere (the files are polled), never after a sleep.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from voxline.audio.wavio import read_wav
from tests.support.ci import IN_CI
from tests.support.cli import VOXLINE
from tests.support.farm import make_recording

pytestmark = pytest.mark.slow

R = 24000


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    return subprocess.Popen([str(VOXLINE), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def last_event_ms(path: Path) -> float:
    """The time of the last whole line of an event log (0 if there is none yet)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0.0
    return float(json.loads(lines[-1])["t_ms"]) if lines else 0.0


def whole_lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "the event log ends in half a line"
    return [json.loads(line) for line in text.splitlines()]


def long_recording(path: Path, seconds: int) -> None:
    """Speech-like bursts every three seconds: a replay of it lasts about ``seconds``."""
    import numpy as np

    from tests.support.hostile import speech

    rng = np.random.default_rng(7)
    samples = np.zeros(seconds * R, dtype=np.int16)
    for at in range(0, seconds - 2, 3):
        burst = speech(rng, 0.7)
        samples[int((at + 0.3) * R):][: len(burst)] = burst
    from voxline.audio.wavio import write_wav

    write_wav(path, samples)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signalled_replay_writes_what_it_heard_its_log_report_and_summary(tmp_path: Path, sig: signal.Signals) -> None:
    long_recording(tmp_path / "call.wav", 30)
    run = start("replay", "call.wav", "--voice", "tone", "--out", "heard.wav", "--events", "events.jsonl",
                "--report", "report.html", "--summary", "summary.json", "--stereo-out", "both.wav", cwd=tmp_path)
    wait_for(lambda: last_event_ms(tmp_path / "events.jsonl") >= 2500, "2.5 s of events")
    run.send_signal(sig)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + sig, err
    assert "Traceback" not in err and f"voxline: {sig.name}: stopping" in err
    assert "(interrupted: what was heard until then)" in out
    heard, rate = read_wav(tmp_path / "heard.wav")
    events = whole_lines(tmp_path / "events.jsonl")
    assert rate == R and 2.0 <= len(heard) / R < 30  # everything heard until the signal, not more
    assert events and events[-1]["dir"] in ("in", "out", "local")
    summary = json.loads((tmp_path / "summary.json").read_text())
    fatal = next(c for c in summary["checks"] if c["name"] == "no fatal session error")
    assert summary["pass"] is False and not fatal["ok"] and "interrupted by " + sig.name in fatal["detail"]
    assert summary["duration_s"] == pytest.approx(len(heard) / R, abs=0.05)
    assert "<svg" in (tmp_path / "report.html").read_text()
    import wave

    import numpy as np

    with wave.open(str(tmp_path / "both.wav"), "rb") as both:  # it ends where the replay stopped, not the input
        sides = np.frombuffer(both.readframes(both.getnframes()), dtype="<i2").reshape(-1, 2)
    user, _ = read_wav(tmp_path / "call.wav")
    assert len(heard) <= len(sides) <= len(heard) + 480 and np.array_equal(sides[: len(heard), 1], heard)
    assert np.array_equal(sides[: len(heard) - 960, 0], user[: len(heard) - 960])  # the last chunk may not be captured


def test_a_replay_stopped_before_any_speech_does_not_call_the_recording_silent(tmp_path: Path) -> None:
    import numpy as np

    from tests.support.hostile import speech
    from voxline.audio.wavio import write_wav

    samples = np.zeros(20 * R, dtype=np.int16)
    burst = speech(np.random.default_rng(3), 0.7)
    samples[15 * R:][: len(burst)] = burst  # the user speaks only at 15 s
    write_wav(tmp_path / "late.wav", samples)
    run = start("replay", "late.wav", "--voice", "tone", "--out", "heard.wav", "--events", "events.jsonl", cwd=tmp_path)
    wait_for(lambda: last_event_ms(tmp_path / "events.jsonl") >= 500, "0.5 s of events")
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM, err
    assert "(interrupted: what was heard until then)" in out and "no speech detected" not in err


def test_sigkill_loses_at_most_the_two_second_window(tmp_path: Path) -> None:
    long_recording(tmp_path / "call.wav", 30)
    run = start("replay", "call.wav", "--voice", "tone", "--out", "heard.wav", "--events", "events.jsonl",
                cwd=tmp_path)
    wait_for(lambda: last_event_ms(tmp_path / "events.jsonl") >= 5000, "5 s of events")
    run.kill()
    run.communicate(timeout=30)
    events = whole_lines(tmp_path / "events.jsonl")  # whole lines only, however it was cut
    heard, rate = read_wav(tmp_path / "heard.wav")  # a valid WAV
    # the log's clock starts before the session's (the built-in server starts first): the first append,
    # one 40 ms chunk after the session's time 0, gives the offset
    first_append = next(float(e["t_ms"]) for e in events  # type: ignore[arg-type]
                        if e["dir"] == "out" and e["event"]["type"] == "input_audio_buffer.append")  # type: ignore[index]
    logged_s = (float(events[-1]["t_ms"]) - first_append) / 1000 + 0.04  # type: ignore[arg-type]
    assert rate == R and len(heard) / R >= logged_s - 2.0 - 0.1  # the window, and one output pass


def test_a_replay_killed_outright_leaves_no_summary_of_the_last_run(tmp_path: Path) -> None:
    """The summary, report and stereo file are written at the end: a replay killed before then left the last run's,
    all green, beside its own new, partial audio."""
    long_recording(tmp_path / "call.wav", 30)
    for name, text in (("summary.json", '{"pass": true}'), ("report.html", "<html></html>"), ("both.wav", "RIFF")):
        (tmp_path / name).write_text(text, encoding="utf-8")
    run = start("replay", "call.wav", "--voice", "tone", "--out", "heard.wav", "--events", "events.jsonl",
                "--report", "report.html", "--summary", "summary.json", "--stereo-out", "both.wav", cwd=tmp_path)
    wait_for(lambda: last_event_ms(tmp_path / "events.jsonl") >= 1000, "1 s of events")
    run.kill()
    run.communicate(timeout=30)
    read_wav(tmp_path / "heard.wav")
    whole_lines(tmp_path / "events.jsonl")
    assert [name for name in ("summary.json", "report.html", "both.wav") if (tmp_path / name).exists()] == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _farm(tmp_path: Path) -> list[str]:
    """One short recording and two long ones: the short one's verdict comes first."""
    make_recording(tmp_path / "a_short.wav", 1, True)
    long_recording(tmp_path / "b_long.wav", 40)
    long_recording(tmp_path / "c_long.wav", 40)
    return ["a_short.wav", "b_long.wav", "c_long.wav"]


def _read_until(run: subprocess.Popen[str], marker: str) -> list[str]:
    assert run.stdout is not None
    lines = []
    for line in run.stdout:
        lines.append(line)
        if marker in line:
            return lines
    err = run.stderr.read() if run.stderr is not None else ""
    raise AssertionError(f"the command ended before printing {marker!r}: {''.join(lines)}{err}")


def _check_interrupted_results(tmp_path: Path, sig: signal.Signals) -> None:
    rows = {r["name"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert rows["a_short"]["status"] == "pass"
    for name in ("b_long", "c_long"):
        assert rows[name]["status"] == "error" and rows[name]["error"].startswith("interrupted"), rows[name]
    suite = ET.parse(tmp_path / "reports" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("errors") == "2"
    for name in ("a_short", "b_long"):  # what ran of each is on disk and valid
        if (tmp_path / "out" / name / "heard.wav").exists():
            read_wav(tmp_path / "out" / name / "heard.wav")
            whole_lines(tmp_path / "out" / name / "events.jsonl")


def test_ctrl_c_on_a_farm_writes_results_and_junit_for_what_finished(tmp_path: Path) -> None:
    inputs = _farm(tmp_path)
    run = start("replay", *inputs, "--voice", "tone", "--jobs", "2", "--out-dir", "out", "--junit",
                "reports/junit.xml", cwd=tmp_path)
    printed = _read_until(run, "a_short")  # its verdict, printed as it finished, while the others run
    assert run.poll() is None and "PASS  a_short" in printed[-1]
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "Traceback" not in err and "interrupted by SIGINT: 1 of 3 recordings finished" in err
    assert "farm: 3 recordings, 1 passed, 0 failed, 2 errors" in out
    _check_interrupted_results(tmp_path, signal.SIGINT)


def test_a_farm_killed_outright_leaves_the_verdicts_it_reached_and_not_the_last_runs(tmp_path: Path) -> None:
    """SIGKILL (an OOM kill, a CI runner gone) gave the farm no chance to write its results: a previous run's
    results.jsonl and JUnit, all green, stayed beside this run's new, partial audio, and so did a recording's
    summary, report and stereo file."""
    inputs = _farm(tmp_path)
    (tmp_path / "out" / "b_long").mkdir(parents=True)
    for name in ("summary.json", "report.html", "stereo.wav"):
        (tmp_path / "out" / "b_long" / name).write_text('{"pass": true}', encoding="utf-8")
    (tmp_path / "out" / "results.jsonl").write_text('{"name": "b_long", "status": "pass"}\n', encoding="utf-8")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "junit.xml").write_text('<testsuites tests="3" failures="0"/>', encoding="utf-8")
    run = start("replay", *inputs, "--voice", "tone", "--jobs", "2", "--out-dir", "out", "--junit",
                "reports/junit.xml", "--farm-report", "--farm-stereo", cwd=tmp_path)
    _read_until(run, "a_short")  # its verdict printed: the others still run
    wait_for(lambda: last_event_ms(tmp_path / "out" / "b_long" / "events.jsonl") > 0, "b_long's first events")
    run.kill()
    run.communicate(timeout=30)
    rows = whole_lines(tmp_path / "out" / "results.jsonl")
    assert [(r["name"], r["status"]) for r in rows] == [("a_short", "pass")]
    assert not (tmp_path / "reports" / "junit.xml").exists()  # no verdict, rather than the last run's
    assert sorted(p.name for p in (tmp_path / "out" / "b_long").iterdir()) == ["events.jsonl", "heard.wav"]


def test_sigterm_ends_a_process_farm_and_its_workers(tmp_path: Path) -> None:
    inputs = _farm(tmp_path)
    run = start("replay", *inputs, "--voice", "tone", "--jobs", "1", "--processes", "2", "--out-dir", "out",
                "--junit", "reports/junit.xml", cwd=tmp_path)
    _read_until(run, "a_short")
    workers = [pid for pid in _children(run.pid) if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]
    assert len(workers) == 2
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 143, err
    assert all(_gone(pid) for pid in workers)  # none is left writing into --out-dir
    _check_interrupted_results(tmp_path, signal.SIGTERM)


def test_workers_of_a_farm_killed_outright_stop_by_themselves(tmp_path: Path) -> None:
    inputs = _farm(tmp_path)
    run = start("replay", *inputs, "--voice", "tone", "--jobs", "1", "--processes", "2", "--out-dir", "out",
                cwd=tmp_path)
    _read_until(run, "a_short")
    workers = [pid for pid in _children(run.pid) if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]
    assert len(workers) == 2
    run.kill()
    _out, err = run.communicate(timeout=60)  # the workers share its stderr: read to the end, theirs included
    wait_for(lambda: all(_gone(pid) for pid in workers), "the workers end after their parent was killed", 60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]  # nobody reads them: no word
    for name in ("b_long", "c_long"):
        read_wav(tmp_path / "out" / name / "heard.wav")  # each ended its replay and left a valid file
        whole_lines(tmp_path / "out" / name / "events.jsonl")


def test_a_farm_under_nohup_goes_on_through_a_hangup_workers_too(tmp_path: Path) -> None:
    """A closed terminal signals the whole process group; ``nohup`` had the command ignore it, and the command
    and its workers put their own handlers over that: the farm stopped (129)."""
    for seed, name in enumerate(("a", "b", "c")):
        make_recording(tmp_path / f"{name}.wav", seed, True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    run = subprocess.Popen([str(VOXLINE), "replay", "a.wav", "b.wav", "c.wav", "--voice", "tone", "--processes", "2",
                            "--jobs", "1", "--out-dir", "out"], cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    _read_until(run, "PASS")  # one verdict; the third recording is still to run, in a worker
    os.killpg(run.pid, signal.SIGHUP)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert "farm: 3 recordings, 3 passed" in out and "SIGHUP" not in err


def _file_limit(size: int) -> Callable[[], None]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_full_disk_is_one_line_and_what_was_written_stays_valid(tmp_path: Path) -> None:
    """And a last run's summary and report do not stay beside this run's files (before, a CI job read their pass)."""
    make_recording(tmp_path / "call.wav", 2, True)
    for stale in ("summary.json", "report.html"):
        (tmp_path / stale).write_text('{"pass": true}')
    run = subprocess.run([str(VOXLINE), "replay", "call.wav", "--fast", "--voice", "tone", "--out", "heard.wav",
                          "--events", "events.jsonl", "--summary", "summary.json", "--report", "report.html"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=_file_limit(150_000))
    assert run.returncode == 1 and "Traceback" not in run.stderr and "Exception" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == "voxline replay: error: cannot write heard.wav: File too large"
    heard, _rate = read_wav(tmp_path / "heard.wav")
    assert len(heard) > R  # the seconds that fitted, in a valid file
    assert (tmp_path / "heard.wav").stat().st_size == 44 + 2 * len(heard)  # no more on disk than the header counts
    whole_lines(tmp_path / "events.jsonl")
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "report.html").exists()


def test_an_out_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    make_recording(tmp_path / "call.wav", 2, False)
    (tmp_path / "file").write_text("not a folder")
    run = subprocess.run([str(VOXLINE), "replay", "call.wav", "--fast", "--voice", "tone", "--out-dir", "file/out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == ("voxline replay: error: --out-dir file/out: cannot make it "
                                                   "(Not a directory)")


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in _children(todo.pop()):
            if not _gone(child):
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.xdist_group("ray")  # one Ray instance of the suite's at a time
def test_sigterm_ends_a_ray_farm_its_tasks_and_its_local_ray(tmp_path: Path) -> None:
    if not IN_CI:
        pytest.importorskip("ray")
    inputs = _farm(tmp_path)
    ray_dir = Path(tempfile.mkdtemp(prefix="vxray-"))  # short: Ray's socket paths live under it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VOXLINE_", "RAY_")) and k != "OPENAI_API_KEY"}
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_TMPDIR": str(ray_dir),
                "HOME": str(tmp_path)})  # Ray's files in a temporary folder, nothing under the real home
    run = subprocess.Popen([str(VOXLINE), "replay", *inputs, "--voice", "tone", "--ray", "--processes", "3",
                            "--jobs", "1", "--out-dir", "out", "--junit", "reports/junit.xml"], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _read_until(run, "a_short")  # its task ended; the other two are replaying
    started = _descendants(run.pid)
    assert started
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 143, err
    try:
        wait_for(lambda: all(_gone(pid) for pid in started), "Ray's processes end with the command", 60)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    _check_interrupted_results(tmp_path, signal.SIGTERM)
    rows = {r["name"]: r for r in whole_lines(tmp_path / "out" / "results.jsonl")}
    for name in ("b_long", "c_long"):  # each task was stopped as a worker is, not killed: it ended its replay
        assert str(rows[name]["error"]).startswith("interrupted after "), rows[name]
        read_wav(tmp_path / "out" / name / "heard.wav")
        whole_lines(tmp_path / "out" / name / "events.jsonl")
