"""Shared test fixtures."""

from __future__ import annotations

import os
import shutil
from typing import Any
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _hypothesis_outside_the_tree() -> None:
    """Hypothesis keeps its example database under the working directory; keep it in a temp dir."""
    import tempfile
    from pathlib import Path

    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "voxline-hypothesis")


_hypothesis_outside_the_tree()
# the one line of system packages the README names (espeak-ng voice, sound-device tests)
SYSTEM_PACKAGES = (Path(__file__).resolve().parent.parent / ".ci" / "system-packages").read_text().split()
INSTALL_HINT = f"sudo apt-get install {' '.join(SYSTEM_PACKAGES)}"


def require_tool(name: str) -> None:
    """Skip when an external tool is missing, except in CI where every test must run."""
    if shutil.which(name) is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but is not installed")
        pytest.skip(f"{name} is not installed ({INSTALL_HINT})")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the PulseAudio daemon the device tests started, if they started one."""
    from tests import device_support

    device_support.stop_started_pulse()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the fault matrix's table when it ran."""
    import sys

    matrix = sys.modules.get("tests.test_fault_matrix")
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
