"""Tests that must run alone while the suite runs on pytest-xdist workers.

An ``xdist_group`` keeps tests of one kind apart from each other, not from the rest of the suite. A
test marked ``alone`` runs while no other test of the run does: every test holds a shared lock on a
file of the run for as long as it runs, and an ``alone`` test an exclusive one. A second file, the
gate, is taken first by every test and held by the ``alone`` one, so that it is not starved: once it
waits, no new test starts until it has run. Outside xdist there is one process and nothing to wait for;
locks taken with ``flock`` go with the process, so a worker that dies holds none.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["turn"]


@contextmanager
def turn(alone: bool, run_temp: Path) -> Iterator[None]:
    """Hold the run's lock for one test: exclusive when ``alone``, else shared with the other tests.

    ``run_temp`` is the run's temporary folder, the same for every worker (the parent of a worker's
    ``tmp_path_factory.getbasetemp()``).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with open(run_temp / "alone.gate", "a") as gate, open(run_temp / "alone.lock", "a") as lock:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
