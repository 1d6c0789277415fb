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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A sound-device test is a slow test: ``-m "not slow"`` leaves it out with the others."""
    for item in items:
        if item.get_closest_marker("device") is not None:
            item.add_marker(pytest.mark.slow)


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
