"""Real clients, each in a virtual environment of its own, driven against the local server.

A client lives in ``tests/clients/<name>/``: ``requirements.in`` (its top-level pins),
``requirements.txt`` (every package pinned, from ``.ci/pin-clients``) and ``drive.py``, a script
that imports only the client and prints one JSON object on stdout. ``.ci/install-clients``
builds the environments (the one step that needs the network); the tests only run them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci import IN_CI, ROOT

__all__ = ["CLIENTS", "DriverRun", "client_python", "run_driver", "venv_root"]

CLIENTS = ROOT / "tests" / "clients"


def venv_root() -> Path:
    """Where ``.ci/install-clients`` puts the environments (``VOXLINE_CLIENTS`` overrides it)."""
    override = os.environ.get("VOXLINE_CLIENTS")
    return Path(override) if override else Path.home() / ".cache" / "voxline" / "clients"


def client_python(name: str) -> Path:
    """The interpreter of client ``name``'s environment, built from its current pins.

    A missing or stale environment fails the test in CI and skips it elsewhere, naming the
    command that builds it.
    """
    requirements = CLIENTS / name / "requirements.txt"
    assert requirements.is_file(), f"no client named {name!r} ({requirements} is missing)"
    venv = venv_root() / name
    python = venv / "bin" / "python"
    stamp = venv / ".requirements-sha256"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    problem = None
    if not python.exists():
        problem = f"the {name} client's environment is not built ({venv})"
    elif not stamp.is_file() or stamp.read_text().strip() != wanted:
        problem = f"the {name} client's environment is older than {requirements.relative_to(ROOT)}"
    if problem is not None:
        if IN_CI:
            pytest.fail(f"{problem}; .ci/install builds it in CI")
        pytest.skip(f"{problem}: run .ci/install-clients {name}")
    return python


@dataclass(frozen=True)
class DriverRun:
    """What a driver printed: its JSON result, and its log (stderr) to search for errors."""

    result: dict[str, Any]
    log: str


async def run_driver(name: str, url: str, *args: str, timeout: float = 60.0) -> DriverRun:
    """Run ``tests/clients/<name>/drive.py --url URL ARGS…`` in the client's environment.

    Awaited, so a server on this event loop keeps serving while the client talks to it. A
    driver that exits non-zero, prints no JSON, or outlives ``timeout`` fails the test with its
    log.
    """
    python = client_python(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LIVEKIT_"))}
    env["PYTHONUNBUFFERED"] = "1"
    proc = await asyncio.create_subprocess_exec(
        str(python), str(CLIENTS / name / "drive.py"), "--url", url, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"the {name} client ran past {timeout} s; its log:\n{err.decode(errors='replace')[-4000:]}")
    log = err.decode(errors="replace")
    if proc.returncode != 0:
        pytest.fail(f"the {name} client exited with {proc.returncode}; its log:\n{log[-4000:]}")
    try:
        result = json.loads(out)
    except ValueError:
        pytest.fail(f"the {name} client printed no JSON result: {out[:400]!r}; its log:\n{log[-4000:]}")
    assert isinstance(result, dict), result
    return DriverRun(result, log)
