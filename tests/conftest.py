"""Fixtures and hooks for the whole suite; the helpers tests import are in ``tests/support/``."""

from __future__ import annotations

from typing import Any

import pytest


def _hypothesis_in_the_users_cache() -> None:
    """Hypothesis keeps its example database (and a few caches) under the working directory; keep them
    in this user's cache instead (``$XDG_CACHE_HOME``, else ``~/.cache``): out of the tree, and out of
    the shared temp dir, where the first user to run would own a folder every later one is warned about."""
    import os
    from pathlib import Path

    from hypothesis import settings
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.database import DirectoryBasedExampleDatabase

    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "voxline" / "hypothesis"
    set_hypothesis_home_dir(home)
    settings.register_profile("voxline", database=DirectoryBasedExampleDatabase(home / "examples"))
    settings.load_profile("voxline")


_hypothesis_in_the_users_cache()


# The full run spreads the tests over pytest-xdist workers (``-n 2 --dist loadgroup``); the tests of one
# ``xdist_group`` run on one worker, one after the other. _PULSE holds every test that plays or records
# through the shared PulseAudio daemon or changes its sinks (loads, unloads, starts it).
_PULSE = "pulse"
_PULSE_FIXTURES = {"pulse", "vdev"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A sound-device test is a slow test (``-m "not slow"`` leaves it out with the others), and every test
    on the sound devices is in the _PULSE group (before xdist reads the groups, hence ``tryfirst``)."""
    for item in items:
        device = item.get_closest_marker("device") is not None
        if device:
            item.add_marker(pytest.mark.slow)
        uses_pulse = device or bool(_PULSE_FIXTURES & set(getattr(item, "fixturenames", ())))
        if uses_pulse and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_PULSE))


@pytest.fixture(autouse=True)
def _alone_or_beside_others(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """On xdist workers, a test marked ``alone`` runs while no other test does (tests/support/parallel.py)."""
    from tests.support.parallel import turn

    alone = request.node.get_closest_marker("alone") is not None
    with turn(alone, tmp_path_factory.getbasetemp().parent):
        yield


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the PulseAudio daemon the device tests started, if they started one."""
    from tests.support import devices

    devices.stop_started_pulse()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the fault matrix's table when it ran."""
    import sys

    matrix = sys.modules.get("tests.support.fault_matrix")
    lines = matrix.fault_table() if matrix is not None else []
    if lines:
        terminalreporter.section("reliability")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _restore_voxline_logging() -> Any:
    """A CLI run in-process configures the ``voxline`` logger for its stderr; undo that after each test."""
    import logging

    logger = logging.getLogger("voxline")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
