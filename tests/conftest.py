"""Shared test fixtures."""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_tool(name: str) -> None:
    """Skip when an external tool is missing, except in CI where every test must run."""
    if shutil.which(name) is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but is not installed")
        pytest.skip(f"{name} is not installed")
