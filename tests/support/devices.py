"""Pytest side of the real sound-device tests: PulseAudio's virtual devices as fixtures.

The machinery (private clones of ``vspk`` and ``vmic``, recordings, signals) is in
``tests/support/virtual_devices.py``, shared with ``benchmarks/bench_device.py``; this module adds the
policy: without PulseAudio the device tests skip, except in CI, where they must run (and
PulseAudio is started, then stopped at the end of the run).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from voxline.audio.device_list import DeviceInfo
from voxline.audio.device_watch import DeviceWatch, _Entry
from voxline.audio.sound_server import ServerDevice
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

__all__ = ["IN_CI", "KIOSK_SPEAKER", "RATE", "ROOT", "FakeSoundServer", "MonitorRecorder", "Samples", "VirtualDevices", "chirp", "find", "kiosk",
           "last_loud", "load_sink", "pactl", "pulse", "read_until", "require_pulse", "running_sink", "stop_started_pulse",
           "unavailable", "unload_sink", "vdev", "wait_for", "watch_over"]

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


def pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], capture_output=True, text=True, check=True).stdout.strip()


def load_sink(name: str, description: str) -> str:
    """A null sink as a USB headset would appear (and its monitor as its microphone); its module's index."""
    return pactl("load-module", "module-null-sink", f"sink_name={name}", "rate=48000", "channels=1",
                 f"sink_properties=device.description={description}")


def unload_sink(name: str) -> None:
    """Unplug it: the sink and its monitor go."""
    for line in pactl("list", "short", "modules").splitlines():
        if f"sink_name={name}" in line:
            subprocess.run(["pactl", "unload-module", line.split()[0]], capture_output=True)


@pytest.fixture
def kiosk() -> Iterator[str]:
    """A null sink of this test's own, as a USB headset would appear; unloaded at the end if still there."""
    require_pulse()
    name = f"voxkiosk{os.getpid()}"
    load_sink(name, "Kiosk_Headset")
    yield name
    unload_sink(name)


async def read_until(session: Any, seen: list[Any], wanted: type, count: int = 1, limit_s: float = 15.0) -> None:
    """Read a session's events into ``seen`` until ``count`` of ``wanted`` came (a bounded wait)."""
    async def read() -> None:
        while sum(isinstance(e, wanted) for e in seen) < count:
            seen.append(await session.__anext__())
    await asyncio.wait_for(read(), limit_s)


@dataclass
class FakeSoundServer:
    """What a device watch asks of a sound server, kept in lists: one output device, ``kiosk``, present or not."""

    present: set[str] = field(default_factory=lambda: {"kiosk"})
    stream_on: str = "kiosk"
    refuse_moves: bool = False
    moves: list[str] = field(default_factory=list)
    polls: int = 0
    failing: int = 0  # polls still to fail, as while the server restarts
    indexes: dict[str, int] = field(default_factory=dict)  # the server's number for a device (default 1)

    def devices(self) -> list[ServerDevice]:
        self.polls += 1
        if self.failing:
            self.failing -= 1
            raise ConnectionError("the sound server went away")
        return [ServerDevice("output", name, name, 48000, 1, False, False, self.indexes.get(name, 1))
                for name in sorted(self.present)]

    def replug(self, name: str) -> None:
        """``name`` unplugged and plugged in again between two polls: back under a new number, its stream moved to
        the fallback meanwhile."""
        self.indexes[name] = self.indexes.get(name, 1) + 1
        if self.stream_on == name:
            self.stream_on = next((other for other in sorted(self.present) if other != name), "")

    def stream_device(self, kind: str, tag: str) -> str | None:
        return self.stream_on

    def default_name(self, kind: str) -> str | None:
        return "builtin"  # the fallback a removed device's streams go to

    def move_stream(self, kind: str, tag: str, name: str) -> bool:
        if self.refuse_moves or name not in self.present:
            return False
        self.moves.append(name)
        self.stream_on = name
        return True

    def close(self) -> None:
        pass


KIOSK_SPEAKER = DeviceInfo(9, "Kiosk Speaker", "PulseAudio", 0, 1, 48000.0, route="kiosk")


def watch_over(server: FakeSoundServer) -> DeviceWatch:
    """A device watch over :data:`KIOSK_SPEAKER` on ``server``."""
    return DeviceWatch(server, [_Entry("output", KIOSK_SPEAKER, "t1")])  # type: ignore[arg-type]
