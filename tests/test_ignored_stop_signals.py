"""A stop signal a command was started ignoring stays ignored.

``nohup voxline replay …`` ignores SIGHUP so that the farm outlives its terminal, and a shell script
starts a job it puts in the background (``&``) with SIGINT ignored. The command put its own
handlers over both, and so did each ``--processes`` worker and Ray task: a closed terminal
stopped a farm run under ``nohup`` (exit 129, every running recording an interrupted error).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxline.session.cli.stopping import Stop
from voxline.session.replay.farm import FarmRecording
from voxline.session.replay.farm.runner import FarmOptions, run_part
from voxline.session.settings import SessionSettings
from tests.support.farm import make_recording


@pytest.fixture
def nohup() -> Iterator[None]:
    """SIGHUP ignored meanwhile, as ``nohup`` starts a command."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_the_command_goes_on_through_a_signal_it_was_started_ignoring(nohup: None) -> None:
    async def main() -> None:
        with Stop() as stop:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            theirs = (signal.SIG_IGN, signal.SIG_DFL, signal.default_int_handler)
            assert all(signal.getsignal(sig) not in theirs for sig in (signal.SIGINT, signal.SIGTERM))
            stop.install()  # again, after a library set its own (Ray's init): still left alone
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.sleep(0)
            assert not stop.stopped and not stop.event.is_set()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN

    asyncio.run(main())


def test_a_worker_started_ignoring_a_hangup_goes_on_through_it(tmp_path: Path, nohup: None) -> None:
    """A worker process (or Ray task) inherits the command's ignored SIGHUP; a hangup reaches the whole process
    group: the part ran on, and its recordings pass. SIGTERM still stops it (the command's way)."""
    make_recording(tmp_path / "a.wav", 1, True)
    recordings = [FarmRecording(name="a", path=tmp_path / "a.wav", folder="a").model_dump(mode="json")]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), fast=True, voice="tone")
    [row] = run_part(recordings, options, stoppable=True,
                     on_start=lambda _name: os.kill(os.getpid(), signal.SIGHUP))  # the terminal closes as it runs
    assert row["status"] == "pass", row
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
