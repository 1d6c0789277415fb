"""How ``--ray`` treats tasks that fail and tasks it stops, against a fake Ray (no cluster needed).

The fake keeps Ray's surface that :func:`run_ray` uses: ``remote``, ``wait``, ``get``, ``cancel``
and ``exceptions.RayError``. Each task follows a script: it reports at once, its worker dies, or
it runs until it is stopped (and then reports, or does not).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from voxline.session.replay.farm.manifest import FarmRecording
from voxline.session.replay.farm.ray_backend import run_ray
from voxline.session.replay.farm.results import Outcome
from voxline.session.replay.farm.runner import FarmOptions
from voxline.session.settings import SessionSettings


class RayError(Exception):
    pass


class FakeRay(types.ModuleType):
    """``scripts[n]`` says what task ``n`` does once asked: ``"done"``, ``"dies"``, ``"stops"`` (reports its
    recordings as interrupted when Ray's gentle cancel reaches it) or ``"hangs"`` (ignores that cancel)."""

    def __init__(self, scripts: list[str]) -> None:
        super().__init__("ray")
        self.exceptions = types.SimpleNamespace(RayError=RayError)
        self.scripts = scripts
        self.parts: list[list[dict[str, Any]]] = []
        self.cancels: list[tuple[int, bool]] = []
        self.stopped: set[int] = set()
        self.stoppable: list[bool] = []
        self.interrupt_in_grace = False

    def is_initialized(self) -> bool:
        return True  # the caller's Ray: neither started nor shut down here

    def remote(self, **_options: Any) -> Callable[[Any], Any]:
        fake = self

        class Task:
            def remote(self, part: list[dict[str, Any]], _options: FarmOptions, stoppable: bool = False) -> int:
                fake.parts.append(part)
                fake.stoppable.append(stoppable)
                return len(fake.parts) - 1  # a task's reference: its number

        return lambda _function: Task()

    def _ready(self, ref: int) -> bool:
        script = self.scripts[ref]
        return script in ("done", "dies") or (script == "stops" and ref in self.stopped)

    def wait(self, pending: list[int], num_returns: int, timeout: float) -> tuple[list[int], list[int]]:
        if self.interrupt_in_grace and self.stopped:
            raise KeyboardInterrupt  # a second signal while the stopped tasks are waited for
        ready = [ref for ref in pending if self._ready(ref)][:num_returns]  # at once: the fake's tasks take no time
        return ready, [ref for ref in pending if ref not in ready]

    def get(self, ref: int) -> list[dict[str, Any]]:
        if self.scripts[ref] == "dies":
            raise RayError("The worker died unexpectedly while executing this task.\nCheck its log.")
        status, error = ("pass", None) if self.scripts[ref] == "done" else ("error", "interrupted after 2.0 s")
        return [Outcome(r["name"], r["path"], status, error=error).to_json() for r in self.parts[ref]]

    def cancel(self, ref: int, force: bool = False) -> None:
        self.cancels.append((ref, force))
        if not force:
            self.stopped.add(ref)


def _farm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripts: list[str],
          stopped: Callable[[], bool] = lambda: False) -> tuple[FakeRay, dict[str, Outcome]]:
    fake = FakeRay(scripts)
    monkeypatch.setitem(sys.modules, "ray", fake)
    recordings = [FarmRecording(name=f"r{n}", path=tmp_path / f"r{n}.wav", folder=f"r{n}") for n in range(len(scripts))]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), voice="tone", jobs=1)
    outcomes = run_ray(recordings, options, len(scripts), None, stopped, grace_s=0.0)
    assert [o.name for o in outcomes] == [r.name for r in recordings]
    return fake, {o.name: o for o in outcomes}


def test_a_task_whose_worker_dies_costs_its_recordings_alone_and_says_why(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, Ray's error came out of the whole farm: no verdict at all, the others' included."""
    _fake, outcomes = _farm(tmp_path, monkeypatch, ["done", "dies", "done"])
    assert [outcomes[n].status for n in ("r0", "r1", "r2")] == ["pass", "error", "pass"]
    assert outcomes["r1"].error == ("its Ray task failed: The worker died unexpectedly while executing this task. "
                                    "Check its log.")


def test_a_stop_asks_each_task_to_end_and_kills_only_the_one_that_does_not(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a stop killed every running task's worker at once, so none closed its files: a heard WAV whose
    header did not count its samples, an event log ending in half a line."""
    fake, outcomes = _farm(tmp_path, monkeypatch, ["done", "stops", "hangs"], stopped=lambda: True)
    assert all(fake.stoppable)  # each task takes SIGINT (Ray's gentle cancel) as its stop
    assert fake.cancels == [(1, False), (2, False), (2, True)]  # the one done was not cancelled
    assert outcomes["r1"].error == "interrupted after 2.0 s"  # its own verdict: it ended its replay
    assert outcomes["r2"].status == "error" and outcomes["r2"].error is not None
    assert outcomes["r2"].error.startswith("interrupted: its task did not report within 0 s of the stop")


def test_a_second_signal_while_the_tasks_are_stopping_still_ends_every_task(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Giving up on the clean end must not leave tasks running on a cluster, writing into --out-dir after the
    command has exited."""
    fake = FakeRay(["stops", "hangs"])
    fake.interrupt_in_grace = True
    monkeypatch.setitem(sys.modules, "ray", fake)
    recordings = [FarmRecording(name=f"r{n}", path=tmp_path / f"r{n}.wav", folder=f"r{n}") for n in range(2)]
    options = FarmOptions(out_dir=tmp_path / "out", settings=SessionSettings(), voice="tone", jobs=1)
    with pytest.raises(KeyboardInterrupt):
        run_ray(recordings, options, 2, None, lambda: True, grace_s=60.0)
    assert fake.cancels == [(0, False), (1, False), (0, True), (1, True)]
