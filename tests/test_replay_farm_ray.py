"""``voxline replay --ray``: a farm's parts as Ray tasks on a local Ray instance the test starts.

One instance for the module: two CPUs, no dashboard, on loopback, its files in a temporary
directory and its token in the environment (nothing written under the home directory). At
the end it is shut down and every process it started must be gone.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.support.ci import IN_CI
from tests.support.cli import one_line_error
from tests.support.farm import make_recording
from voxline.audio.wavio import read_wav
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.cli import main
from voxline.session.replay import replay_fast

# starts a local Ray instance and runs the command; one Ray instance of the suite's at a time
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        if IN_CI:
            pytest.fail("ray is required in CI (the dev extra installs voxline[ray])")
        pytest.skip("ray is not installed (pip install 'voxline[ray]')")
    return ray


def _command(pid: int) -> str:
    """``pid`` and its command line, for a report."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} " + " ".join(a.decode(errors="replace") for a in args if a)[:200]


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.fixture(scope="module")
def local_ray() -> Iterator[ModuleType]:
    temp = tempfile.mkdtemp(prefix="vxray-")  # short: Ray's socket paths live under it
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}  # read when ray is imported
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    ray = _import_ray()
    before = _descendants(os.getpid())  # what earlier tests left running is not the instance's
    # ray.init installs its own SIGTERM handler in this process (sys.exit(15)) and shutdown leaves it: put back
    # what was there, or a later test's forked child that is sent SIGTERM exits with 15 instead of dying of it
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp,
             logging_level=logging.WARNING, log_to_driver=False)
    started: set[int] = set()
    try:
        yield ray
        started = _descendants(os.getpid()) - before
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        deadline = time.monotonic() + 60  # waiting for the processes to exit, not asserting a duration
        while _alive(started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _alive(started)
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert started, "the Ray instance started no process of its own"
    assert not left, f"Ray left processes behind: {[_command(pid) for pid in sorted(left)]}"


def test_a_farm_runs_as_ray_tasks_and_reports_like_any_other(local_ray: ModuleType, tmp_path: Path) -> None:
    assert local_ray.is_initialized()
    (tmp_path / "calls").mkdir()
    entries = []
    for n in range(6):
        make_recording(tmp_path / "calls" / f"call{n}.wav", n, interrupt=n % 2 == 1)
        expected = 9 if n == 4 else n % 2  # call4 is made to fail
        entries.append(f'[[recording]]\npath = "calls/call{n}.wav"\nexpect = {{ barge_ins = {expected}, '
                       f"max_cut_error_ms = 1 }}\n")
    (tmp_path / "farm.toml").write_text("\n".join(entries))
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    code = main(["replay", "--manifest", str(tmp_path / "farm.toml"), "--fast", "--voice", "tone", "--ray",
                 "--processes", "2", "--jobs", "3", "--out-dir", str(out), "--junit", str(junit)])
    assert code == 1  # call4's expectation fails
    assert local_ray.is_initialized()  # a Ray the caller started is left to the caller
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["name"], r["status"], r["barge_ins"]) for r in rows] == [
        (f"call{n}", "fail" if n == 4 else "pass", n % 2) for n in range(6)]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("6", "1")
    (failed,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "call4"
    # the tasks wrote their recordings' outputs under the shared out dir, as a replay alone would hear them
    samples, _rate = read_wav(tmp_path / "calls" / "call3.wav")
    alone = replay_fast(samples, scenario=load_scenario(None), voice="tone")
    assert alone.heard is not None and np.array_equal(read_wav(out / "call3" / "heard.wav")[0], alone.heard)


def test_without_ray_installed_the_flag_says_how_to_get_it(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    for n in range(2):
        make_recording(tmp_path / f"r{n}.wav", n, interrupt=False)
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    env = {k: v for k, v in env.items() if not k.startswith("VOXLINE_")}
    run = subprocess.run([str(Path(sys.executable).parent / "voxline"), "replay", str(tmp_path / "r0.wav"),
                          str(tmp_path / "r1.wav"), "--fast", "--ray", "--out-dir", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert "pip install 'voxline[ray]'" in one_line_error(run)


def test_a_cluster_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not imported here: the module's instance reads its token at import
        _import_ray()
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for n in range(2):
        make_recording(tmp_path / f"r{n}.wav", n, interrupt=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VOXLINE_", "RAY_"))}
    run = subprocess.run([str(Path(sys.executable).parent / "voxline"), "replay", str(tmp_path / "r0.wav"),
                          str(tmp_path / "r1.wav"), "--fast", "--ray", f"127.0.0.1:{port}", "--out-dir",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=120, env=env)
    assert f"--ray: cannot reach the Ray cluster at 127.0.0.1:{port}" in one_line_error(run)
    assert not (tmp_path / "out").exists()  # nothing started


def test_the_ray_extra_is_declared_and_in_the_test_install() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(req.replace(" ", "").startswith("ray>=") for req in extras["ray"])
    assert any("ray" in req for req in extras["dev"] if req.startswith("voxline["))
