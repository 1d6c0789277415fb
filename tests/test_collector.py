"""What a process holds when its first session starts is kept out of the collector's full walks."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator

import numpy as np
import pytest

from voxline.base import collector
from voxline.realtime.server import ServerConfig, load_scenario, serve
from voxline.session.replay import replay_fast


class Held:
    """A container object the collector tracks (an instance with a ``__dict__``)."""


def walked(obj: object) -> bool:
    """True if a full collection would walk ``obj`` (frozen objects are in no generation)."""
    return any(o is obj for o in gc.get_objects())


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if no session had started in this process yet; the collector as it was afterwards."""
    monkeypatch.setitem(collector._state, "done", False)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_freezes_what_is_alive_once(fresh_process: None) -> None:
    before = Held()
    assert walked(before)
    assert collector.settle() is True
    assert gc.get_freeze_count() > 0 and not walked(before)
    after = Held()
    assert collector.settle() is False  # once per process: what sessions make later stays collectable
    assert walked(after)


def test_a_cycle_made_after_the_settle_is_still_collected(fresh_process: None) -> None:
    collector.settle()
    cycle = Held()
    cycle.me = cycle  # type: ignore[attr-defined]
    ref = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert ref() is None


def test_the_first_session_settles_the_process(fresh_process: None) -> None:
    setup = Held()  # an application's state made before its first session
    samples = np.zeros(24_000, dtype=np.int16)
    replay_fast(samples, scenario=load_scenario(None), voice="tone", tail_s=0.5)
    assert gc.get_freeze_count() > 0 and not walked(setup)


def test_leave_alone_keeps_sessions_from_touching_the_collector(fresh_process: None) -> None:
    collector.leave_alone()
    setup = Held()
    samples = np.zeros(24_000, dtype=np.int16)
    replay_fast(samples, scenario=load_scenario(None), voice="tone", tail_s=0.5)
    assert walked(setup) and gc.get_freeze_count() == 0


async def test_the_local_server_settles_when_it_starts(fresh_process: None) -> None:
    setup = Held()
    async with serve(ServerConfig(port=0, voice="tone")):
        assert gc.get_freeze_count() > 0 and not walked(setup)


EXIT_SCRIPT = """
import numpy as np, soxr
from voxline.realtime.server import load_scenario
from voxline.session.replay import replay_fast

class Held:
    pass

held = Held()
held.me = held  # a cycle: only the collector can free it, and the resampler it holds
held.resampler = soxr.ResampleStream(48000, 24000, 1, dtype="int16")
replay_fast(np.zeros(24000, dtype=np.int16), scenario=load_scenario(None), voice="tone", tail_s=0.5)
"""


def test_what_was_frozen_is_finalized_at_exit() -> None:
    # soxr's binding reports, at exit, every resampler the interpreter never finalized
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "leaked" not in done.stderr, done.stderr
