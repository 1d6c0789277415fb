"""Helpers for the real sound-device tests: PulseAudio's virtual devices, recordings, signals.

The device tests run on private clones of ``vspk`` and ``vmic`` (null sinks kept clocked by
a loopback into ``vdump``, selected with ``PULSE_SINK`` / ``PULSE_SOURCE``), so that other
programs playing into the shared virtual devices cannot mix into the recordings. Without
PulseAudio they skip, except in CI, where they must run (and PulseAudio is started).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from voxline.audio.device_list import list_devices, refresh_devices
from voxline.audio.device_speaker import SpeakerSink
from voxline.base.errors import AudioError
from voxline.audio.playout import PlayoutBuffer
from tests.conftest import INSTALL_HINT

RATE = 24000
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parent.parent
Samples = npt.NDArray[np.int16]


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
    for tool in ("pactl", "parec", "paplay"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed")
    if subprocess.run(["pactl", "info"], capture_output=True).returncode != 0 and shutil.which("pulseaudio"):
        # the virtual devices are part of the test setup: start them as CI does, and stop them at the end
        started = subprocess.run([str(ROOT / ".ci" / "pulse-start")], capture_output=True, text=True)
        _started_pulse = _started_pulse or "pulseaudio started" in started.stdout
    if subprocess.run(["pactl", "info"], capture_output=True).returncode != 0:
        unavailable("PulseAudio is not running and could not be started (.ci/pulse-start)")
    sinks = subprocess.run(["pactl", "list", "short", "sinks"], capture_output=True, text=True).stdout
    if not {"vspk", "vmic", "vdump"} <= {line.split()[1] for line in sinks.splitlines() if line.strip()}:
        unavailable("the virtual sinks vspk, vmic and vdump are missing (start PulseAudio with .ci/pulse-start)")
    try:
        if not list_devices():
            refresh_devices()  # PortAudio was initialised before the server was reachable
        if not list_devices():
            unavailable("PortAudio sees no sound devices")
    except AudioError as exc:
        unavailable(str(exc))


@pytest.fixture
def pulse() -> None:
    require_pulse()


@dataclass(frozen=True)
class VirtualDevices:
    """A private speaker sink and microphone sink; record or capture their ``.monitor``."""

    speaker: str
    mic: str


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def vdev() -> Iterator[VirtualDevices]:
    """Clones of vspk (48 kHz) and vmic (24 kHz) for this module; the default sink/source meanwhile."""
    require_pulse()
    tag = f"{os.getpid()}x{next(_TAGS)}"
    devices = VirtualDevices(speaker=f"voxspk{tag}", mic=f"voxmic{tag}")
    modules: list[str] = []
    saved = {key: os.environ.get(key) for key in ("PULSE_SINK", "PULSE_SOURCE")}
    try:
        for sink, rate in ((devices.speaker, 48000), (devices.mic, 24000)):
            modules.append(_pactl("load-module", "module-null-sink", f"sink_name={sink}", f"rate={rate}", "channels=1"))
            # a loopback keeps the idle null sink clocked in short blocks
            loopback = ("module-loopback", f"source={sink}.monitor", "sink=vdump", "latency_msec=20")
            modules.append(_pactl("load-module", *loopback))
        os.environ["PULSE_SINK"], os.environ["PULSE_SOURCE"] = devices.speaker, f"{devices.mic}.monitor"
        time.sleep(2.5)  # new null sinks settle into low-latency clocking (ENVIRONMENT.md)
        yield devices
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for module in reversed(modules):
            subprocess.run(["pactl", "unload-module", module], capture_output=True)


_TAGS = itertools.count()


def chirp(seconds: float, amplitude: int = 12000, f0: float = 300.0, f1: float = 1200.0) -> Samples:
    """A constant-envelope linear chirp: easy to find by correlation, with a sharp end."""
    t = np.arange(int(seconds * RATE)) / RATE
    phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * seconds))
    return np.round(amplitude * np.sin(phase)).astype(np.int16)


def find(
    recording: Samples, reference: Samples, start: int = 0, first_above: float | None = None
) -> tuple[int, float]:
    """Offset of ``reference`` in ``recording[start:]`` (absolute) and its normalised correlation.

    The best match, or with ``first_above`` the best one near the first match scoring above it.
    """
    x = recording[start:].astype(np.float64)
    ref = reference.astype(np.float64)
    n, m = len(x), len(ref)
    if n < m:
        return start, 0.0
    size = 1 << (n + m).bit_length()
    corr = np.fft.irfft(np.fft.rfft(x, size) * np.conj(np.fft.rfft(ref, size)), size)[: n - m + 1]
    cumulative = np.concatenate([[0.0], np.cumsum(x**2)])
    energy = cumulative[m:] - cumulative[: n - m + 1]
    score = corr / np.sqrt(np.maximum(energy, 1.0) * float((ref**2).sum()))
    if first_above is not None and (above := np.nonzero(score > first_above)[0]).size:
        near = score[above[0] : above[0] + m]
        best = int(above[0] + np.argmax(near))
    else:
        best = int(np.argmax(score))
    return start + best, float(score[best])


class MonitorRecorder:
    """``parec`` on a PulseAudio source (s16le mono 24 kHz), pumped into memory by a thread."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._buffer = bytearray()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MonitorRecorder:
        command = ["parec", "-d", self.source, "--format=s16le", f"--rate={RATE}", "--channels=1", "--raw"]
        self._process = subprocess.Popen([*command, "--latency-msec=10"], stdout=subprocess.PIPE)
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()
        wait_for(lambda: len(self._buffer) >= RATE // 5, "parec to deliver audio")
        return self

    def _pump(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while chunk := os.read(fd, 65536):
            self._buffer.extend(chunk)

    def stop(self) -> Samples:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
        if self._thread is not None:
            self._thread.join(timeout=10)
        data = bytes(self._buffer)
        return np.frombuffer(data[: len(data) // 2 * 2], dtype=np.int16).copy()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(condition: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    """Poll ``condition()`` (a readiness wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def running_sink(playout: PlayoutBuffer, **options: object) -> SpeakerSink:
    sink = SpeakerSink(playout, **options)  # type: ignore[arg-type]
    sink.start()
    wait_for(lambda: sink.running and sink.callbacks > sink.warmup_blocks + 5, "the speaker stream to run")
    return sink


def last_loud(samples: Samples, threshold: int) -> int:
    """Index after the last sample with magnitude above ``threshold`` (0 if none)."""
    loud = np.nonzero(np.abs(samples.astype(np.int32)) > threshold)[0]
    return int(loud[-1]) + 1 if len(loud) else 0


