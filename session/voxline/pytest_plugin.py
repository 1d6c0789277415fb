"""voxline's pytest plugin (the ``pytest11`` entry point ``voxline``): interruption tests in a test suite.

* **Farm manifests as tests.** Every file named ``*.farm.toml`` (or matching the ``voxline_farms``
  ini option's globs) that pytest reaches is collected: one test item per recording, named by the
  recording (``calls.farm.toml::refund``), replayed in lockstep against the built-in server as
  ``voxline replay --manifest … --fast`` does. An expectation that does not hold fails the item
  with the failed expectations as its message; a recording that cannot run (a file cut short, a
  bad scenario) is an error of that item. ``-k``, ``-x`` and ``--junitxml`` work on them as on
  any test. Each recording's ``heard.wav`` and ``events.jsonl`` go under ``--voxline-out-dir``
  (default: a folder of pytest's temporary directory), in folders that follow the manifest's path
  (``tests/calls.farm.toml/refund/``; a part that is not a safe folder name is made one and given a
  short hash of itself, so no two manifests meet, whichever of them a run collects), and within it
  one named after the recording, unique as a farm's (``-2``, ``-3`` …); an output that would be the
  recording itself fails its item. A glob with a ``/`` is matched against the
  file's path from pytest's root directory, one without against its name.
* **The** ``voxline_replay`` **fixture** runs a lockstep replay inside a test:
  ``voxline_replay("calls/refund.wav", scenario="tools").check(barge_ins=1)`` (see
  :func:`voxline.session.replay.check.replay_in_lockstep`).

The module imports nothing of voxline until a manifest is collected or the fixture used, so a
test run with neither pays nothing for it. ``-p no:voxline`` turns it off.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from voxline.session.replay.check import ReplayRunner
    from voxline.session.replay.farm import FarmRecording, Outcome

__all__ = ["FarmFile", "RecordingItem", "voxline_replay"]

DEFAULT_GLOB = "*.farm.toml"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("voxline", "voxline interruption tests")
    group.addoption("--voxline-out-dir", default=None, metavar="DIR",
                    help="where collected farm recordings write heard.wav and events.jsonl (default: pytest's "
                         "temporary directory)")
    group.addoption("--voxline-voice", default=None, choices=["auto", "espeak", "tone"],
                    help="the built-in server's voice for collected farm recordings (default: the voxline_voice "
                         "ini option, else tone)")
    parser.addini("voxline_farms", type="args", default=[DEFAULT_GLOB],
                  help=f"file-name globs of replay farm manifests to collect as tests (default {DEFAULT_GLOB})")
    parser.addini("voxline_voice", default="tone", help="the built-in server's voice for farm recordings")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> FarmFile | None:
    if file_path.suffix != ".toml":
        return None
    globs = parent.config.getini("voxline_farms")
    try:
        relative = file_path.relative_to(parent.config.rootpath).as_posix()
    except ValueError:
        relative = file_path.as_posix()
    if any(fnmatch.fnmatch(relative if "/" in g else file_path.name, g) for g in globs):
        farm: FarmFile = FarmFile.from_parent(parent, path=file_path)
        return farm
    return None


class FarmFile(pytest.File):
    """A replay farm manifest: its recordings as items."""

    def collect(self) -> Iterator[RecordingItem]:
        from voxline.base.errors import VoxlineError
        from voxline.session.replay.farm import load_manifest

        from voxline.session.replay.farm.layout import assign_folders

        try:
            recordings = assign_folders(load_manifest(self.path))
        except VoxlineError as exc:
            raise self.CollectError(str(exc)) from None
        from voxline.base.shown import printable

        for recording in recordings:  # a name taken from a file's stem is shown with its controls escaped
            yield RecordingItem.from_parent(self, name=printable(recording.name), recording=recording)


class FarmCheckFailed(Exception):
    """A recording whose replay did not pass: its verdict."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message())
        self.outcome = outcome


class RecordingItem(pytest.Item):
    """One recording of a farm manifest, replayed in lockstep and judged."""

    def __init__(self, *, recording: FarmRecording, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recording = recording

    def runtest(self) -> None:
        from voxline.session.replay.farm import Outcome, run_part
        from voxline.session.replay.farm.layout import check_outputs

        out_dir = _out_dir(self.config) / _manifest_folder(self.parent.nodeid if self.parent else "farm")
        options = _farm_options(self.config, out_dir)
        check_outputs([self.recording], out_dir, [], [self.path])  # never written over the recording itself
        (row,) = run_part([self.recording.model_dump(mode="json")], options)
        outcome = Outcome.from_json(row)
        self.user_properties.extend([("status", outcome.status), ("barge_ins", outcome.barge_ins),
                                     ("heard", outcome.heard or ""), ("events", outcome.events or "")])
        if outcome.status != "pass":
            raise FarmCheckFailed(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, FarmCheckFailed):
            outcome = excinfo.value.outcome
            where = f"\n  heard: {outcome.heard}\n  events: {outcome.events}" if outcome.heard else ""
            kind = "could not run" if outcome.status == "error" else "failed"
            return f"{self.recording.path} {kind}: {outcome.message()}{where}"
        from voxline.base.errors import VoxlineError

        if isinstance(excinfo.value, VoxlineError):
            return f"{self.recording.path} could not run: {excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"recording {self.name} ({self.recording.path.name})"


def _manifest_folder(nodeid: str) -> Path:
    """The manifest's folders under the out-dir: its node id's path, each part a safe folder name, and one that
    had to be changed to be one given a short hash of itself. The same node id always has the same folders and
    two never share them, whatever else a run collects (``--lf``, one path named)."""
    from voxline.session.replay.farm.layout import safe_folder

    parts = []
    for part in nodeid.split("/"):
        safe = safe_folder(part)
        if safe != part:
            safe = f"{safe}-{hashlib.sha256(part.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
        parts.append(safe)
    return Path(*parts)


def _out_dir(config: pytest.Config) -> Path:
    given = config.getoption("voxline_out_dir")
    if given:
        return Path(given).resolve()
    cached = getattr(config, "_voxline_out_dir", None)
    if cached is None:
        cached = config._tmp_path_factory.mktemp("voxline-farms", numbered=True)  # type: ignore[attr-defined]
        setattr(config, "_voxline_out_dir", cached)
    return Path(cached)


def _farm_options(config: pytest.Config, out_dir: Path) -> Any:
    from pydantic import SecretStr

    from voxline.base.urls import LOCAL_KEY
    from voxline.session.replay.farm import FarmOptions
    from voxline.session.settings import SessionSettings

    voice = config.getoption("voxline_voice") or config.getini("voxline_voice")
    settings = SessionSettings(url="ws://local", api_key=SecretStr(LOCAL_KEY), turn_detection="server_vad")
    return FarmOptions(out_dir=out_dir, settings=settings, fast=True, jobs=1, voice=voice)


@pytest.fixture(scope="session")
def voxline_replay() -> ReplayRunner:
    """Run a lockstep replay in the test: ``voxline_replay(recording, scenario=…, tools=…)`` → a
    :class:`~voxline.session.replay.check.ReplayRun` (``.result``, ``.heard``, ``.sent``, ``.check(...)``);
    annotate the argument with :class:`~voxline.session.replay.check.ReplayRunner`."""
    from voxline.session.replay.check import replay_in_lockstep

    return replay_in_lockstep
