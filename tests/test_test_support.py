"""The test support stops the PulseAudio daemon it started, and only that one.

Run against a fake ``subprocess.run``: no daemon is started or stopped here.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.support import devices, virtual_devices


class FakeSystem:
    """Answers the commands require_pulse runs, as a machine with or without a running daemon would."""

    def __init__(self, running: bool) -> None:
        self.running = running
        self.commands: list[list[str]] = []

    def run(self, command: list[str], **_options: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(command))
        out, code = "", 0
        if command[:2] == ["pactl", "info"]:
            code = 0 if self.running else 1
        elif command[0].endswith("pulse-start"):
            out = "pulseaudio already running" if self.running else "pulseaudio started: sinks vspk, vmic, vdump"
            self.running = True
        elif command[:3] == ["pactl", "list", "short"]:
            out = "0\tvspk\tx\n1\tvmic\tx\n2\tvdump\tx\n"
        elif command[:2] == ["pulseaudio", "--kill"]:
            self.running = False
        return subprocess.CompletedProcess(command, code, out, "")


@pytest.fixture
def system(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> FakeSystem:
    fake = FakeSystem(running=request.param)
    monkeypatch.setattr(devices.subprocess, "run", fake.run)
    monkeypatch.setattr(devices.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(virtual_devices, "list_devices", lambda: [object()])
    monkeypatch.setattr(devices, "_started_pulse", False)
    return fake


@pytest.mark.parametrize("system", [False], indirect=True)
def test_a_daemon_the_tests_started_is_stopped_once_at_the_end(system: FakeSystem) -> None:
    devices.require_pulse()
    devices.require_pulse()  # a second device test finds it running
    devices.stop_started_pulse()
    devices.stop_started_pulse()
    assert system.commands.count(["pulseaudio", "--kill"]) == 1 and not system.running


@pytest.mark.parametrize("system", [True], indirect=True)
def test_a_daemon_that_was_already_running_is_left_alone(system: FakeSystem) -> None:
    devices.require_pulse()
    devices.stop_started_pulse()
    assert ["pulseaudio", "--kill"] not in system.commands and system.running
