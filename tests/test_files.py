"""Files written whole (``voxline.base.files.replaced``): reports, summaries, the stereo export,
the JUnit file and the mirror's state never leave half a file, and never replace a device or a pipe;
files written as a run goes replace the last run's only once the run began (``SetAside``)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import wave
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.stereo import write_stereo
from voxline.audio.wavio import write_wav
from voxline.base.errors import AudioError
from voxline.base.files import STDOUT, drop_stale, replaced
from voxline.base.set_aside import SetAside
from tests.support.ci import ROOT
from tests.support.cli import EXAMPLE, VOXLINE


def test_the_new_content_replaces_the_old_only_once_written(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    with replaced(target) as file:
        file.write(b"new")
        assert target.read_text() == "old"  # a reader meanwhile finds the old file, whole
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old")
    with pytest.raises(OSError, match="No space left"):
        with replaced(target) as file:
            file.write(b"half of it")
            raise OSError(28, "No space left on device")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    with pytest.raises(KeyboardInterrupt):
        with replaced(tmp_path / "new.json") as file:
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_device_is_named_and_the_other_writes_are_still_made(tmp_path: Path) -> None:
    """``--results /dev/full`` said 'No space left on device' without naming the file, and the JUnit file after
    it was never written."""
    from voxline.base.files import each_written

    with pytest.raises(OSError) as full:
        with replaced("/dev/full") as out:
            out.write(b"x" * 100_000)
    assert full.value.filename == "/dev/full" and full.value.strerror == "No space left on device"

    def junit() -> None:
        with replaced(tmp_path / "junit.xml") as out:
            out.write(b"<testsuites/>")

    def results() -> None:
        with replaced("/dev/full") as out:
            out.write(b"x" * 100_000)

    with pytest.raises(OSError, match="No space left on device"):
        each_written(results, junit)
    assert (tmp_path / "junit.xml").read_bytes() == b"<testsuites/>"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        with replaced(tmp_path):
            pass


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as f:
            into.append(f.read())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_pipe_is_written_in_place_and_stays_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    with replaced(fifo) as file:
        file.write(b"streamed")
    reader.join(10)
    assert got == [b"streamed"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_the_stereo_export_goes_to_a_pipe_whole_and_to_a_file_only_whole(tmp_path: Path) -> None:
    write_wav(tmp_path / "heard.wav", np.arange(2400, dtype=np.int16))
    fifo = tmp_path / "both.wav"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    assert write_stereo(fifo, np.ones(4800, dtype=np.int16), tmp_path / "heard.wav") == 4800
    reader.join(10)
    assert len(got[0]) == 44 + 4 * 4800 and stat.S_ISFIFO(fifo.stat().st_mode)  # a header that needs no seek back

    class Broken:
        frames = 4800

        def read(self, n: int) -> np.ndarray:
            raise OSError(5, "Input/output error")

    target = tmp_path / "stereo.wav"
    with pytest.raises(AudioError, match="^cannot read the audio to pair in .*: Input/output error$"):
        write_stereo(target, Broken(), tmp_path / "heard.wav")  # a reading's failure, not the file's
    assert not target.exists() and not (tmp_path / "stereo.wav.tmp").exists()


def test_replay_writes_its_summary_into_a_pipe_and_refuses_an_out_it_cannot_read_back(tmp_path: Path) -> None:
    fifo = tmp_path / "summary.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                          str(tmp_path / "heard.wav"), "--events", str(tmp_path / "events.jsonl"), "--summary", str(fifo)],
                         capture_output=True, text=True, timeout=120)
    reader.join(10)
    assert run.returncode == 0, run.stderr
    assert got and b'"pass"' in got[0] and stat.S_ISFIFO(fifo.stat().st_mode)
    refused = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out", os.devnull,
                              "--events", str(tmp_path / "e.jsonl"), "--report", str(tmp_path / "r.html")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and refused.stderr.strip().splitlines() == [
        f"voxline replay: error: --report, --summary and --stereo-out read --out back, and {os.devnull} is not a "
        "regular file"]
    assert not (tmp_path / "e.jsonl").exists()  # refused before anything ran


def test_this_processs_own_stdout_is_written_after_what_it_printed_not_over_it(tmp_path: Path) -> None:
    """With the shell's output sent to a file, ``/dev/stdout`` opened anew starts at the file's beginning: a
    document written there went over the lines printed before it. It now follows them."""
    script = ("import sys; from voxline.base.files import replaced, is_stdout\n"
              "print('before', flush=True)\n"
              "assert is_stdout('/dev/stdout') and not is_stdout('/dev/null')\n"
              "with replaced('/dev/stdout') as file: file.write(b'{\"document\": 1}\\n')\n"
              "print('after')\n")
    redirected = tmp_path / "out.txt"
    with open(redirected, "wb") as stdout:
        run = subprocess.run([sys.executable, "-c", script], stdout=stdout, stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 0, run.stderr
    assert redirected.read_text() == 'before\n{"document": 1}\nafter\n'


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_a_summary_sent_to_stdout_is_stdout_alone_and_the_lines_for_people_go_to_stderr(tmp_path: Path,
                                                                                       name: str) -> None:
    redirected = tmp_path / "summary.json"
    with open(redirected, "wb") as stdout:
        run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                              str(tmp_path / "heard.wav"), "--events", str(tmp_path / "events.jsonl"),
                              "--summary", name], cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE, text=True,
                             timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(redirected.read_text())["pass"] is True  # the whole file is the document
    named = "'-' (stdout)" if name == "-" else name  # as the user gave it
    assert "barge-in" in run.stderr and f"wrote {named} (checks: pass)" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "heard.wav", "summary.json"]  # no '-'


def test_a_farms_results_go_to_stdout_whole(tmp_path: Path) -> None:
    for name in ("a.wav", "b.wav"):
        shutil.copy(EXAMPLE, tmp_path / name)
    piped = subprocess.run([str(VOXLINE), "replay", str(tmp_path / "a.wav"), str(tmp_path / "b.wav"), "--fast",
                            "--voice", "tone", "--out-dir", str(tmp_path / "out"), "--results", "-"],
                           capture_output=True, text=True, timeout=180)
    assert piped.returncode == 0, piped.stderr
    assert sorted(json.loads(line)["name"] for line in piped.stdout.splitlines()) == ["a", "b"]
    assert "farm: 2 recordings, 2 passed" in piped.stderr


def test_dash_is_refused_for_a_file_written_as_the_run_goes(tmp_path: Path) -> None:
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--events", "-"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [
        "voxline replay: error: --events writes a file as the run goes; '-' (stdout) is for --summary, --report, "
        "--stereo-out, --results and --junit (see voxline replay --help)"]
    assert list(tmp_path.iterdir()) == []
    named = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--events", "./-",
                            "--out", "heard.wav", "--summary", "./-.json"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert named.returncode == 0, named.stderr  # a file a user names ./- is that file
    assert (tmp_path / "-").is_file() and json.loads((tmp_path / "-.json").read_text())["pass"] is True


@pytest.mark.parametrize(("flag", "name", "stream"), [("--events", "/dev/stdout", "stdout"),
                                                     ("--out", "/dev/stderr", "stderr"),
                                                     ("--events", "lines.txt", "stdout")])
def test_a_file_written_as_the_run_goes_is_refused_on_the_file_the_commands_output_goes_to(
        tmp_path: Path, flag: str, name: str, stream: str) -> None:
    """Opened anew, the shell's file started over at its beginning: the event log went over the lines printed there
    and they over it, neither readable. ``lines.txt`` is the file the shell sent stdout (and stderr) to."""
    redirected = tmp_path / "lines.txt"
    other = "--out" if flag == "--events" else "--events"
    with open(redirected, "wb") as output:
        run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", other,
                              str(tmp_path / "other"), flag, name], cwd=tmp_path, stdout=output,
                             stderr=output, timeout=60)
    assert run.returncode == 2 and redirected.read_text().splitlines() == [
        f"voxline replay: error: {flag} {name} is the file this command's {stream} goes to: opened again it would be "
        "written over from its start; name another file (see voxline replay --help)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.txt"]


def test_events_to_stderr_on_a_pipe_or_a_terminal_go_on_where_it_is(tmp_path: Path) -> None:
    """Only a regular file is written over when opened anew: watching the events as they come still works."""
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                          str(tmp_path / "heard.wav"), "--events", "/dev/stderr"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    logged = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert logged and logged[0]["event"]["type"] == "session.update" and "barge-in" in run.stdout


def test_two_documents_for_stdout_are_refused_by_the_name_the_user_gave(tmp_path: Path) -> None:
    one = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--summary", "-", "--report", "-"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert one.returncode == 2 and one.stderr.strip().splitlines() == [  # a command line that cannot work as given
        "voxline replay: error: '-' (stdout) is named for two outputs; choose another name for one (see voxline "
        "replay --help)"]
    shutil.copy(EXAMPLE, tmp_path / "a.wav")
    farm = subprocess.run([str(VOXLINE), "replay", "a.wav", "--fast", "--out-dir", "out", "--results", "-",
                           "--junit", "-"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert farm.returncode == 2 and farm.stderr.strip().splitlines() == [
        "voxline replay: error: '-' (stdout) would be written twice; choose another name (see voxline replay --help)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.wav"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("farm", [False, True])
def test_an_output_on_a_full_device_is_named_and_the_other_outputs_are_written(tmp_path: Path, farm: bool) -> None:
    """``--summary /dev/full --report r.html --stereo-out s.wav`` wrote neither of the others (the report's and
    the stereo file's failures ended the writes), and a farm's ``--results /dev/full`` kept its JUnit file back."""
    shutil.copy(EXAMPLE, tmp_path / "a.wav")
    if farm:
        args, others = ["--out-dir", "out", "--results", "/dev/full", "--junit", "j.xml"], ["j.xml"]
    else:
        args, others = ["--out", "h.wav", "--events", "e.jsonl", "--summary", "/dev/full", "--report", "r.html",
                        "--stereo-out", "s.wav"], ["r.html", "s.wav"]
    run = subprocess.run([str(VOXLINE), "replay", "a.wav", *args, "--fast", "--voice", "tone"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].endswith("/dev/full: No space left on device"), run.stderr
    assert all((tmp_path / name).stat().st_size > 0 for name in others)


@pytest.mark.parametrize("farm", [False, True])
def test_stdout_whose_reader_went_away_ends_the_command_quietly_and_the_other_documents_are_written(
        tmp_path: Path, farm: bool) -> None:
    """``voxline replay … --summary - | true``: no error line about the pipe, as every command ends when its reader
    has gone (before: 'cannot write /dev/stdout: Broken pipe' for one replay, nothing for a farm), and a document
    for a file named beside it is still written whole (before: never written)."""
    shutil.copy(EXAMPLE, tmp_path / "a.wav")
    if farm:
        args = ["a.wav", "--out-dir", "out", "--results", "-", "--junit", "j.xml"]
    else:
        args = ["a.wav", "--out", "h.wav", "--events", "e.jsonl", "--summary", "-", "--report", "r.html",
                "--stereo-out", "s.wav"]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the document is written
    try:
        run = subprocess.run([str(VOXLINE), "replay", *args, "--fast", "--voice", "tone"], cwd=tmp_path,
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        # stderr in the same dead pipe (2>&1 | true): the lines for people are dropped, the files still written
        # (before: the first line ended the run, and nothing was written)
        both = subprocess.run([str(VOXLINE), "replay", *args, "--fast", "--voice", "tone", "--junit" if farm else
                               "--report", "j2.xml" if farm else "r2.html"], cwd=tmp_path, stdout=write,
                              stderr=write, timeout=120)
    finally:
        os.close(write)
    assert run.returncode == 1 and both.returncode == 1
    assert "pipe" not in run.stderr.lower() and "Traceback" not in run.stderr and "error" not in run.stderr, run.stderr
    if farm:
        assert 'tests="1"' in (tmp_path / "j.xml").read_text() and 'tests="1"' in (tmp_path / "j2.xml").read_text()
    else:
        assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
        assert (tmp_path / "r2.html").read_text().rstrip().endswith("</html>")
        assert (tmp_path / "s.wav").stat().st_size > 44


@pytest.mark.parametrize("farm", [False, True])
def test_a_replay_whose_stdout_reader_went_away_still_runs_to_its_end_and_writes_its_files(
        tmp_path: Path, farm: bool) -> None:
    """``voxline replay … | head -1``, no document on stdout: its lines for people are dropped once the reader has
    gone, and the run writes what it was asked for (before: a farm's next verdict line ended it with a traceback
    and no JUnit file; one replay stopped at its next line, with a part of the recording heard and no summary)."""
    shutil.copy(EXAMPLE, tmp_path / "a.wav")
    shutil.copy(EXAMPLE, tmp_path / "b.wav")
    if farm:
        args = ["a.wav", "b.wav", "--out-dir", "out", "--junit", "j.xml"]
    else:
        args = ["a.wav", "--out", "h.wav", "--events", "e.jsonl", "--summary", "s.json"]
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run([str(VOXLINE), "replay", *args, "--fast", "--voice", "tone"], cwd=tmp_path,
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert run.returncode == 1 and "Traceback" not in run.stderr and "error" not in run.stderr, run.stderr
    if farm:
        assert 'tests="2"' in (tmp_path / "j.xml").read_text()
        assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 2
    else:
        assert json.loads((tmp_path / "s.json").read_text())["pass"] is True
        with wave.open(str(tmp_path / "h.wav")) as heard:
            assert heard.getnframes() > 10 * heard.getframerate()


def test_a_command_started_with_stdout_closed_writes_nothing_into_a_file_of_its_own(tmp_path: Path) -> None:
    """``voxline … >&-``: the first file the process opened took descriptor 1, and the summary meant for stdout was
    written into it (its event loop's epoll: 'Invalid argument', and r.html never written)."""
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                          str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl"), "--summary", "-",
                          "--report", str(tmp_path / "r.html")], stderr=subprocess.PIPE, text=True, timeout=120,
                         preexec_fn=lambda: os.close(1))
    assert run.returncode == 0 and "error" not in run.stderr, run.stderr
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
    assert json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])


def test_a_stereo_file_for_stdout_goes_through_a_pipe(tmp_path: Path) -> None:
    """Before: 'cannot write /dev/stdout: Illegal seek' for any input over a second (the header was patched, by a
    seek back, after each second written)."""
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out",
                          str(tmp_path / "h.wav"), "--events", str(tmp_path / "e.jsonl"), "--stereo-out", "-"],
                         capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr
    with wave.open(io.BytesIO(run.stdout)) as stereo:
        assert stereo.getnchannels() == 2 and stereo.getnframes() > 10 * stereo.getframerate()
        assert len(run.stdout) == 44 + 4 * stereo.getnframes()


def test_a_document_for_stdout_is_written_whole_when_stderr_is_closed_or_the_pipe_does_not_block(
        tmp_path: Path) -> None:
    """stderr closed at the start, the lines for people go nowhere (before: the summary was lost, exit 1); a pipe
    handed over in non-blocking mode, the whole report goes through a slow reader (before: the first 64 KiB)."""
    args = [str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone", "--out", str(tmp_path / "h.wav"),
            "--events", str(tmp_path / "e.jsonl")]
    redirected = tmp_path / "summary.json"
    with open(redirected, "wb") as stdout:
        closed = subprocess.run([*args, "--summary", "-"], stdout=stdout, stderr=subprocess.DEVNULL, timeout=120,
                                preexec_fn=lambda: os.close(2))
    assert closed.returncode == 0 and json.loads(redirected.read_text())["pass"] is True
    read, write = os.pipe()
    fcntl.fcntl(write, 1031, 4096)  # F_SETPIPE_SZ: a small pipe, as full as a slow reader leaves it
    os.set_blocking(write, False)
    got: list[bytes] = []

    def slowly() -> None:
        with open(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                got.append(chunk)
                threading.Event().wait(0.001)

    reader = threading.Thread(target=slowly)
    reader.start()
    try:
        run = subprocess.run([*args, "--report", "-"], stdout=write, stderr=subprocess.PIPE, timeout=120)
        assert not os.get_blocking(write)  # the pipe handed back as it was handed over
    finally:
        os.close(write)
        reader.join(30)
    assert run.returncode == 0, run.stderr
    page = b"".join(got)
    assert page.startswith(b"<!DOCTYPE html>") and page.rstrip().endswith(b"</html>") and len(page) > 8 * 4096


def test_a_file_in_a_folder_that_takes_no_new_file_is_written_in_place(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.jsonl"
    target.write_text("old")

    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / ".results.jsonl.x.tmp"))

    monkeypatch.setattr("voxline.base.files.tempfile.mkstemp", refused)
    with replaced(target) as file:
        file.write(b"new")
    assert target.read_text() == "new"
    with pytest.raises(PermissionError) as raised, replaced(tmp_path / "fresh.json") as file:
        file.write(b"never")
    assert raised.value.filename == str(tmp_path / "fresh.json")  # the file named, not a temporary one


def test_a_link_to_a_file_stays_a_link_and_the_file_it_names_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "summary.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    with replaced(link) as file:
        file.write(b"new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new" and sorted(p.name for p in real.parent.iterdir()) == ["summary.json"]


def test_a_link_through_proc_is_written_into_and_never_replaced(tmp_path: Path) -> None:
    # /dev/stdout links to /proc/self/fd/1; with the shell's output sent to a file, that link leads to a
    # regular file, and a rename over /dev/stdout would have put a file where the machine's link was.
    # The same shape, made here: a link to the /proc entry of a descriptor open on a regular file.
    redirected = tmp_path / "redirected.txt"
    with open(redirected, "wb") as stream:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{stream.fileno()}")
        assert link.is_file()  # what made it look like a file to replace
        with replaced(link) as file:
            file.write(b"streamed")
        assert link.is_symlink() and os.readlink(link) == f"/proc/self/fd/{stream.fileno()}"
    assert redirected.read_bytes() == b"streamed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["redirected.txt", "stdout"]


def test_a_replaced_file_keeps_its_mode_and_a_users_tmp_file_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old")
    target.chmod(0o600)
    (tmp_path / "summary.json.tmp").write_text("mine")  # a file of the user's, named as a temporary one might be
    with replaced(target) as file:
        file.write(b"new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert (tmp_path / "summary.json.tmp").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json", "summary.json.tmp"]
    fresh = tmp_path / "fresh.json"
    with replaced(fresh) as file:
        file.write(b"{}")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # a new file as open() makes one


def test_files_set_aside_come_back_if_the_run_never_began(tmp_path: Path) -> None:
    heard, events = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    heard.write_bytes(b"last run's audio")
    heard.chmod(0o600)
    aside = SetAside([heard, events])  # events.jsonl did not exist
    heard.write_bytes(b"")  # the new run's files, opened before it could connect
    events.write_text("")
    assert len(list(tmp_path.glob(".heard.wav.*.previous"))) == 1
    aside.put_back()
    assert heard.read_bytes() == b"last run's audio" and stat.S_IMODE(heard.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heard.wav"]  # no empty events.jsonl stays behind


def test_files_set_aside_go_once_the_run_began_and_put_back_is_then_nothing(tmp_path: Path) -> None:
    heard = tmp_path / "heard.wav"
    heard.write_bytes(b"last run's audio")
    aside = SetAside([heard])
    heard.write_bytes(b"this run's audio")
    aside.keep_new()
    aside.keep_new()
    aside.put_back()  # a failure later in the run: what it wrote stays
    assert heard.read_bytes() == b"this run's audio" and [p.name for p in tmp_path.iterdir()] == ["heard.wav"]


def test_what_runs_killed_before_they_began_set_aside_is_put_back_by_the_next(tmp_path: Path) -> None:
    """Before, a run killed while it connected left the last run's file as .NAME.….previous for good, and each
    such kill added another: the next run set aside the killed one's empty start, and the result was lost."""
    heard = tmp_path / "heard.wav"
    heard.write_bytes(b"the last result")
    os.utime(heard, (1_000_000, 1_000_000))
    for _killed in range(2):  # set aside, then never settled: the process died
        SetAside([heard])
        assert heard.read_bytes() == b""
    assert len(list(tmp_path.glob(".heard.wav.*.previous"))) == 1  # the second run put the first one's back
    aside = SetAside([heard])
    aside.put_back()  # this run, too, never began
    assert heard.read_bytes() == b"the last result"
    assert [p.name for p in tmp_path.iterdir()] == ["heard.wav"]


class Killed(BaseException):
    """The process dying at this point: nothing after it runs, no handler cleans up."""


@pytest.mark.parametrize("at", ["os.replace", "os.unlink", "os.open"])
def test_a_run_killed_while_it_sets_a_file_aside_leaves_the_last_result_to_come_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: str) -> None:
    """Before, the name for the old file was taken with an empty file first: killed between that and the rename,
    the next run put that empty file back over the last run's result, which was lost. And killed after the rename,
    before the new file was made, the next run found no file there and left the last result hidden for good."""
    heard = tmp_path / "heard.wav"
    heard.write_bytes(b"the last result")
    name = at.removeprefix("os.")
    real = getattr(os, name)

    def kill(*args: object, **kwargs: object) -> object:
        if os.fspath(args[0]) == os.fspath(heard):  # a step on the file itself: the rename, the unlink, the new file
            raise Killed
        return real(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(os, name, kill)
        patched.setattr(SetAside, "put_back", lambda self: None)  # a process killed runs no handler of its own
        with contextlib.suppress(Killed):
            SetAside([heard])
    for leftover in tmp_path.glob(".heard.wav.*.previous"):
        assert leftover.read_bytes() == b"the last result"
    SetAside([heard]).put_back()  # the next run, which never began either
    assert heard.read_bytes() == b"the last result"
    assert [p.name for p in tmp_path.iterdir()] == ["heard.wav"]


def test_where_files_take_no_second_name_they_are_set_aside_by_renaming(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # as FAT or some network file systems answer os.link

    monkeypatch.setattr(os, "link", refused)
    heard = tmp_path / "heard.wav"
    heard.write_bytes(b"the last result")
    aside = SetAside([heard])
    assert heard.read_bytes() == b"" and len(list(tmp_path.glob(".heard.wav.*.previous"))) == 1
    aside.put_back()
    assert heard.read_bytes() == b"the last result" and [p.name for p in tmp_path.iterdir()] == ["heard.wav"]


def test_a_leftover_is_put_back_only_over_its_own_file(tmp_path: Path) -> None:
    """``--out take.wav --events take.wav.jsonl``: the events' leftover also begins '.take.wav.'; before, the audio
    was given the events' content, and the audio's leftover deleted as a stub."""
    heard, events = tmp_path / "take.wav", tmp_path / "take.wav.jsonl"
    heard.write_bytes(b"audio")
    events.write_text("events\n")
    SetAside([heard, events])  # killed before the run began
    SetAside([heard, events]).put_back()
    assert heard.read_bytes() == b"audio" and events.read_text() == "events\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["take.wav", "take.wav.jsonl"]


def test_a_links_file_is_set_aside_and_the_link_stays_a_device_never_is(tmp_path: Path) -> None:
    real = tmp_path / "real.wav"
    real.write_bytes(b"old")
    link = tmp_path / "link.wav"
    link.symlink_to(real)
    aside = SetAside([link, Path("/dev/null")])
    assert link.is_symlink() and real.read_bytes() == b"" and Path("/dev/null").exists()
    link.write_bytes(b"new, through the link")
    aside.put_back()
    assert link.is_symlink() and real.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.wav", "real.wav"]


def test_the_new_file_takes_the_old_ones_mode_at_once(tmp_path: Path) -> None:
    private = tmp_path / "events.jsonl"
    private.write_text("old")
    private.chmod(0o600)
    aside = SetAside([private])
    assert private.read_bytes() == b"" and stat.S_IMODE(private.stat().st_mode) == 0o600
    with open(private, "w") as file:  # as the event log opens it
        file.write("new")
    aside.keep_new()
    assert private.read_text() == "new" and stat.S_IMODE(private.stat().st_mode) == 0o600


def test_a_file_that_is_not_writable_is_left_for_its_writer_to_refuse(tmp_path: Path) -> None:
    locked = tmp_path / "heard.wav"
    locked.write_bytes(b"keep me")
    locked.chmod(0o444)
    check = (
        "import sys\n"
        "from pathlib import Path\n"
        "from voxline.base.set_aside import SetAside\n"
        "locked = Path(sys.argv[1])\n"
        "aside = SetAside([locked])\n"
        "try:\n"
        "    open(locked, 'wb')\n"
        "except PermissionError:\n"
        "    print('refused')\n"
        "aside.put_back()\n"
    )
    command = [sys.executable, "-c", check, str(locked)]
    if os.access(locked, os.W_OK):  # root, whose overrides write any file: the check runs without them
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root, and no setpriv to drop the overrides with")
        command = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner", *command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.stdout == "refused\n", run.stderr
    assert locked.read_bytes() == b"keep me" and [p.name for p in tmp_path.iterdir()] == ["heard.wav"]


def test_a_replay_that_cannot_connect_leaves_the_last_runs_files_as_they_were(tmp_path: Path) -> None:
    heard, events = tmp_path / "h.wav", tmp_path / "e.jsonl"
    heard.write_bytes(b"the last run's heard audio")
    events.write_text('{"the": "last run"}\n')
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--url", "ws://127.0.0.1:9/v1", "--out", str(heard),
                          "--events", str(events)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.returncode == 1 and "cannot connect" in run.stderr
    assert heard.read_bytes() == b"the last run's heard audio" and events.read_text() == '{"the": "last run"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.jsonl", "h.wav"]


def test_a_replay_that_cannot_connect_leaves_no_empty_file_under_a_new_name(tmp_path: Path) -> None:
    run = subprocess.run([str(VOXLINE), "replay", str(EXAMPLE), "--url", "ws://127.0.0.1:9/v1", "--out",
                          str(tmp_path / "new.wav"), "--events", str(tmp_path / "new.jsonl")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.returncode == 1 and "cannot connect" in run.stderr
    assert list(tmp_path.iterdir()) == []  # a 44-byte WAV and an empty log looked like a silent run's


@pytest.mark.parametrize("after_first_frame", [False, True], ids=["at-once", "after-the-clients-first-frame"])
def test_a_server_that_hangs_up_before_its_first_event_leaves_the_last_runs_files(tmp_path: Path,
                                                                                  after_first_frame: bool) -> None:
    heard, events = tmp_path / "h.wav", tmp_path / "e.jsonl"
    heard.write_bytes(b"the last run's heard audio")
    events.write_text('{"the": "last run"}\n')
    code = (
        "import asyncio, subprocess, sys\n"
        "from tests.support.silent_server import hanging_up\n"
        "async def main():\n"
        f"    async with hanging_up({after_first_frame}) as s:\n"
        "        r = await asyncio.to_thread(subprocess.run, [sys.executable, '-m', 'voxline', 'replay',\n"
        f"            {str(EXAMPLE)!r}, '--url', s.url, '--out', {str(heard)!r}, '--events', {str(events)!r}],\n"
        "            capture_output=True, text=True)\n"
        "        print(r.returncode); sys.stdout.write(r.stderr)\n"
        "asyncio.run(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.stdout.splitlines()[0] == "1", run.stdout + run.stderr
    assert heard.read_bytes() == b"the last run's heard audio" and events.read_text() == '{"the": "last run"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.jsonl", "h.wav"]


def test_an_output_that_cannot_be_written_is_refused_before_the_run_and_nothing_is_touched(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"the": "last run"}\n')
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    command = [str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--out", str(locked / "heard.wav"),
               "--events", str(events)]
    if os.access(locked, os.W_OK):  # root, whose overrides write anywhere: the check runs without them
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root, and no setpriv to drop the overrides with")
        command = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner", *command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"cannot write {locked / 'heard.wav'}: permission denied" in run.stderr
    assert events.read_text() == '{"the": "last run"}\n'  # --fast emptied it before failing on --out
    assert run.stdout == ""  # refused before the replay began


FULL = Path("/dev/full")  # every write to it fails: a full disk
needs_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full (Linux has one)")


@needs_full
@pytest.mark.parametrize("flag", ["--out", "--events", "--summary", "--stereo-out"])
def test_a_replay_that_runs_out_of_disk_names_the_file_in_one_line(tmp_path: Path, flag: str) -> None:
    outputs = {"--out": tmp_path / "heard.wav", "--events": tmp_path / "events.jsonl", flag: FULL}
    command = [str(VOXLINE), "replay", str(EXAMPLE), "--fast", "--voice", "tone"]
    for name, path in outputs.items():  # --summary and --stereo-out read --out back: it is a file then
        command += [name, str(path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    notice = "voxline: the built-in local server's engine in process"  # said before every --fast replay
    errors = [line for line in run.stderr.splitlines() if not line.startswith(notice)]
    assert run.returncode == 1
    assert errors == ["voxline replay: error: cannot write /dev/full: No space left on device"], run.stderr


@needs_full
def test_a_farm_recording_whose_log_runs_out_of_disk_is_an_error_naming_the_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        shutil.copy(EXAMPLE, tmp_path / f"{name}.wav")
    (tmp_path / "out" / "b").mkdir(parents=True)
    (tmp_path / "out" / "b" / "events.jsonl").symlink_to(FULL)
    run = subprocess.run([str(VOXLINE), "replay", "a.wav", "b.wav", "--fast", "--voice", "tone", "--out-dir", "out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    rows = {row["name"]: row for row in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert rows["a"]["status"] == "pass"
    assert rows["b"]["status"] == "error"
    assert rows["b"]["error"] == f"cannot write {tmp_path / 'out' / 'b' / 'events.jsonl'}: No space left on device"


def test_a_document_the_disk_cannot_hold_is_named_not_its_temporary_file(tmp_path: Path) -> None:
    """A farm on a full disk ended in 'error: No space left on device', naming no file: the write into the
    temporary file failed with no name on it. The file the user named is named."""
    target = tmp_path / "results.jsonl"
    script = (f"import resource, signal\nfrom voxline.base.files import replaced\n"
              f"signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              f"resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))\n"
              f"try:\n    with replaced({str(target)!r}) as out:\n        out.write(b'x' * 100_000)\n        out.flush()\n"
              f"except OSError as exc:\n    print(exc.filename, exc.strerror)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{target} File too large"
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nor is the temporary file left behind


def test_a_file_written_as_a_run_goes_is_a_new_file_in_place_of_the_old_never_the_old_one(tmp_path: Path) -> None:
    """A farm's results journal opened the old file to write: through a hard link it emptied another file, through
    a link to stderr's file it wrote over the command's own lines; a stale JUnit behind a link had the link removed."""
    from voxline.base.files import fresh_file, rewritten_file

    old = tmp_path / "results.jsonl"
    old.write_text("last run\n")
    old.chmod(0o640)
    twin = tmp_path / "twin.jsonl"
    os.link(old, twin)
    link = tmp_path / "link.jsonl"
    link.symlink_to(old)
    new = fresh_file(link)
    assert new is not None
    with new:
        new.write(b"this run\n")
    assert link.is_symlink() and old.read_text() == "this run\n" and (old.stat().st_mode & 0o777) == 0o640
    assert twin.read_text() == "last run\n"  # the other hard link keeps what it held
    assert rewritten_file(link) == old and rewritten_file(tmp_path / "none") is None
    assert fresh_file("/dev/null") is None and rewritten_file("/dev/null") is None
    made = fresh_file(tmp_path / "made.jsonl")
    assert made is not None
    made.close()
    assert (tmp_path / "made.jsonl").read_bytes() == b""
    script = ("import sys\nfrom voxline.base.files import fresh_file, rewritten_file\n"
              "print(fresh_file(sys.argv[1]), rewritten_file(sys.argv[1]), flush=True)\n")
    with open(tmp_path / "lines.txt", "wb") as output:  # this process's stdout, a regular file: written in place
        run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "lines.txt")], stdout=output,
                             stderr=subprocess.PIPE, timeout=60)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "lines.txt").read_text() == "None None\n"


def test_a_stale_document_is_dropped_as_a_file_and_never_where_documents_are_written_in_place(tmp_path: Path) -> None:
    """Before, a failed replay unlinked whatever its --summary and --report named: '-' (/dev/stdout) and /dev/null
    too, as root; and a link, leaving its target to pass for this run's."""
    target = tmp_path / "real-summary.json"
    target.write_text('{"pass": true}')
    link = tmp_path / "summary.json"
    link.symlink_to(target)
    drop_stale(link)
    assert link.is_symlink() and not target.exists()
    plain = tmp_path / "report.html"
    plain.write_text("<p>pass</p>")
    drop_stale(plain)
    drop_stale(tmp_path / "never-written.json")
    assert not plain.exists()
    for in_place in (STDOUT, Path("/dev/null"), Path(os.devnull)):
        drop_stale(in_place)
    assert Path("/dev/null").exists() and Path("/dev/stdout").exists()
