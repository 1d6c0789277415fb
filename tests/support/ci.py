"""Where the tests run: CI, where every test must run, or a machine that may lack system tools."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = ["INSTALL_HINT", "IN_CI", "ROOT", "SYSTEM_PACKAGES", "require_tool"]

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# the one line of system packages the README names (espeak-ng voice, sound-device tests)
SYSTEM_PACKAGES = (ROOT / ".ci" / "system-packages").read_text().split()
INSTALL_HINT = f"sudo apt-get install {' '.join(SYSTEM_PACKAGES)}"


def require_tool(name: str) -> None:
    """Skip when an external tool is missing, except in CI where every test must run."""
    if shutil.which(name) is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but is not installed")
        pytest.skip(f"{name} is not installed ({INSTALL_HINT})")
