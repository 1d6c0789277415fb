"""Pytest side of the real sound-device tests: PulseAudio's virtual devices as fixtures.

The machinery (private clones of ``vspk`` and ``vmic``, recordings, signals) is in
``tests/support/virtual_devices.py``, shared with ``benchmarks/bench_device.py``; this module adds the
policy: without PulseAudio the device tests skip, except in CI, where they must run (and
PulseAudio is started, then stopped at the end of the run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import virtual_devices
from tests.support.ci import IN_CI, INSTALL_HINT, ROOT
from tests.support.virtual_devices import (
    RATE,
    MonitorRecorder,
    Samples,
    VirtualDevices,
    chirp,
    find,
    last_loud,
    private_devices,
    running_sink,
    wait_for,
)

__all__ = ["IN_CI", "RATE", "ROOT", "MonitorRecorder", "Samples", "VirtualDevices", "chirp", "find", "last_loud",
           "pulse", "require_pulse", "running_sink", "stop_started_pulse", "unavailable", "vdev", "wait_for"]

_started_pulse = False  # whether these tests started the PulseAudio daemon (and so must stop it)


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; the device tests must run in CI")
    pytest.skip(f"{reason} (device tests need: {INSTALL_HINT})")


def stop_started_pulse() -> None:
    """Stop the daemon :func:`require_pulse` started; one that was already running is left alone."""
    global _started_pulse
    if _started_pulse:
        subprocess.run(["pulseaudio", "--kill"], capture_output=True, timeout=30)
        _started_pulse = False


def require_pulse() -> None:
    """Skip without PulseAudio's virtual devices, except in CI where they must exist."""
    global _started_pulse
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/xdg-runtime-{os.getuid()}")
    tools = all(shutil.which(tool) is not None for tool in ("pactl", "parec", "paplay"))
    if tools and subprocess.run(["pactl", "info"], capture_output=True).returncode != 0 and shutil.which("pulseaudio"):
        # the virtual devices are part of the test setup: start them as CI does, and stop them at the end
        started = subprocess.run([str(ROOT / ".ci" / "pulse-start")], capture_output=True, text=True)
        _started_pulse = _started_pulse or "pulseaudio started" in started.stdout
    if (problem := virtual_devices.pulse_problem()) is not None:
        unavailable(problem)


@pytest.fixture
def pulse() -> None:
    require_pulse()


@pytest.fixture(scope="module")
def vdev() -> Iterator[VirtualDevices]:
    """Private clones of vspk (48 kHz) and vmic (24 kHz) for this module; the default sink/source meanwhile."""
    require_pulse()
    with private_devices() as devices:
        yield devices
