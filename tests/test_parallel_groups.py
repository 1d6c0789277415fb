"""The full run spreads the tests over pytest-xdist workers; the tests of one ``xdist_group`` must still
run on one worker (so one after the other), and every test on the sound devices must be in the ``pulse``
group. pytest-xdist finds a test's group through its node id, and a pytest whose node ids it cannot
rewrite drops every group without a word; this is the test that notices.

A small pytest session runs in a subprocess with this suite's settings (pyproject.toml and
tests/conftest.py) on three workers; each inner test writes down the worker it ran on.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.parallel import turn

ROOT = Path(__file__).resolve().parent.parent

INNER = '''
import json, os
from pathlib import Path

import pytest

OUT = Path(os.environ["GROUPS_OUT"])


@pytest.fixture
def vdev():  # stands for the device fixture of the same name: the name alone puts a test in the group
    return None


def note(name):
    (OUT / f"{name}.json").write_text(json.dumps({"worker": os.environ["PYTEST_XDIST_WORKER"]}))


@pytest.mark.parametrize("n", range(4))
def test_on_the_devices(vdev, n):
    note(f"pulse-vdev-{n}")


@pytest.mark.device
@pytest.mark.parametrize("n", range(4))
def test_marked_device(n):
    note(f"pulse-marked-{n}")


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("n", range(4))
def test_in_a_named_group(n):
    note(f"ray-{n}")


@pytest.mark.parametrize("n", range(8))
def test_free(n):
    note(f"free-{n}")
'''


@pytest.mark.slow  # a pytest run on three worker processes
def test_a_group_runs_on_one_worker_and_the_device_tests_share_one(tmp_path: Path) -> None:
    tests, out = tmp_path / "inner", tmp_path / "out"
    tests.mkdir()
    out.mkdir()
    (tests / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTHONPATH=str(ROOT), GROUPS_OUT=str(out))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tests),
         "-p", "tests.conftest", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", str(tests)],
        cwd=tests, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "20 passed" in run.stdout
    records = {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}
    assert len(records) == 20
    for group in ("pulse", "ray"):
        members = [r for name, r in records.items() if name.startswith(group)]
        assert len(members) == (8 if group == "pulse" else 4)
        assert len({r["worker"] for r in members}) == 1, f"the {group} group ran on several workers"
    # the other tests were spread out: the run was parallel at all
    assert len({r["worker"] for r in records.values()}) > 1


def _enter_in_a_thread(alone: bool, folder: Path) -> tuple[threading.Event, threading.Event]:
    """A thread that takes its turn (as one worker would); ``inside`` once it has it, ``leave`` to end it."""
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with turn(alone, folder):
            inside.set()
            leave.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    return inside, leave


def _free(path: Path, how: int) -> bool:
    """Whether another worker could take ``path``'s lock this way now (asked without waiting)."""
    with open(path, "a") as probe:
        try:
            fcntl.flock(probe, how | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(probe, fcntl.LOCK_UN)
        return True


def _until(condition: Callable[[], bool]) -> None:
    """Wait for a state the threads reach (a guard against a hang, not a timing check)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the threads never got there"
        time.sleep(0.005)


def test_an_alone_test_waits_for_the_running_ones_and_no_new_one_starts_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # each turn opens the files anew, so two threads exclude each other as two workers would
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    gate, lock = tmp_path / "alone.gate", tmp_path / "alone.lock"
    first, end_first = _enter_in_a_thread(False, tmp_path)
    second, end_second = _enter_in_a_thread(False, tmp_path)
    assert first.wait(10) and second.wait(10)  # ordinary tests run side by side
    assert _free(gate, fcntl.LOCK_EX) and not _free(lock, fcntl.LOCK_EX)  # nobody waits; an alone one could not go in
    alone, end_alone = _enter_in_a_thread(True, tmp_path)
    _until(lambda: not _free(gate, fcntl.LOCK_EX))  # the alone test waits, holding the gate
    end_first.set()
    assert not alone.is_set()  # the second test still holds the lock shared
    late, end_late = _enter_in_a_thread(False, tmp_path)
    end_second.set()
    assert alone.wait(10)
    assert not _free(lock, fcntl.LOCK_SH) and not _free(gate, fcntl.LOCK_EX)  # nothing may start beside it
    assert not late.is_set()
    end_alone.set()
    assert late.wait(10)
    end_late.set()


def test_in_one_process_a_turn_waits_for_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    with turn(True, tmp_path), turn(True, tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []
