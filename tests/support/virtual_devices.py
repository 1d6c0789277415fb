"""PulseAudio's virtual devices for real sound-device measurements, with no test framework attached.

Shared by the device tests (through ``tests/support/devices.py``, which adds the pytest fixtures
and the skip-or-fail policy) and by ``benchmarks/bench_device.py``:

* :func:`pulse_problem` says why the virtual devices cannot be used (``None`` when they can);
* :func:`private_devices` loads private clones of ``vspk`` and ``vmic`` (null sinks kept clocked
  by a loopback into ``vdump``) and points ``PULSE_SINK`` / ``PULSE_SOURCE`` at them, so that
  other programs playing into the shared devices cannot mix into a recording;
* :class:`MonitorRecorder` records a sink's monitor with ``parec``; :func:`chirp`, :func:`find`
  and :func:`bursts` make a signal and find it again in a recording;
* :func:`play_and_cut` plays a chirp through :class:`~voxline.audio.device_speaker.SpeakerSink`
  and interrupts it several times, the barge-in the ledger must account for exactly.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxline.audio.device_list import Latency, list_devices, refresh_devices
from voxline.audio.device_speaker import SpeakerSink
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.base.errors import AudioError

__all__ = ["BLOCK", "CUT_AFTER", "FADE_MS", "RATE", "TOLERANCE", "CutRun", "MonitorRecorder", "RecordingMismatch",
           "Samples", "VirtualDevices", "bursts", "chirp", "find", "last_loud", "play_and_cut", "private_devices",
           "pulse_problem", "running_sink", "stop_of", "wait_for"]

RATE = 24000
Samples = npt.NDArray[np.int16]
BLOCK = 480  # device block at 24 kHz (20 ms)
FADE_MS = 5.0
TOLERANCE = BLOCK + int(FADE_MS * RATE / 1000)  # one device block + 5 ms, in samples
CUT_AFTER = (0.35, 0.8, 1.25, 1.7, 2.3)  # seconds of the item heard before each barge-in
LOUD = 600  # the chirp's amplitude is 12000; silence after the cut is below this
HEAD = 4800  # the first 200 ms, to find each burst by correlation
SETTLE_S = 2.5  # new null sinks settle into low-latency clocking
_TAGS = itertools.count()


class RecordingMismatch(RuntimeError):
    """A recording does not hold what was played, or the device misbehaved while it played."""


def pulse_problem() -> str | None:
    """Why PulseAudio's virtual devices cannot be used here, or ``None`` when they can (starts nothing)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/xdg-runtime-{os.getuid()}")
    for tool in ("pactl", "parec", "paplay"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if subprocess.run(["pactl", "info"], capture_output=True).returncode != 0:
        return "PulseAudio is not running (.ci/pulse-start starts it)"
    sinks = subprocess.run(["pactl", "list", "short", "sinks"], capture_output=True, text=True).stdout
    if not {"vspk", "vmic", "vdump"} <= {line.split()[1] for line in sinks.splitlines() if line.strip()}:
        return "the virtual sinks vspk, vmic and vdump are missing (start PulseAudio with .ci/pulse-start)"
    try:
        if not list_devices():
            refresh_devices()  # PortAudio was initialised before the server was reachable
        if not list_devices():
            return "PortAudio sees no sound devices"
    except AudioError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class VirtualDevices:
    """A private speaker sink and microphone sink; record or capture their ``.monitor``."""

    speaker: str
    mic: str


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def private_devices() -> Iterator[VirtualDevices]:
    """Clones of vspk (48 kHz) and vmic (24 kHz), the default sink and source while inside."""
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
        time.sleep(SETTLE_S)
        yield devices
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for module in reversed(modules):
            subprocess.run(["pactl", "unload-module", module], capture_output=True)


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
        try:
            wait_for(lambda: len(self._buffer) >= RATE // 5, "parec to deliver audio")
        except BaseException:
            self.stop()
            raise
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
    """Poll ``condition()`` (a readiness wait, not a timing assertion); :class:`TimeoutError` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def running_sink(playout: PlayoutBuffer, **options: object) -> SpeakerSink:
    sink = SpeakerSink(playout, **options)  # type: ignore[arg-type]
    sink.start()
    try:
        wait_for(lambda: sink.running and sink.callbacks > sink.warmup_blocks + 5, "the speaker stream to run")
    except BaseException:
        sink.close()
        raise
    return sink


def last_loud(samples: Samples, threshold: int) -> int:
    """Index after the last sample with magnitude above ``threshold`` (0 if none)."""
    loud = np.nonzero(np.abs(samples.astype(np.int32)) > threshold)[0]
    return int(loud[-1]) + 1 if len(loud) else 0


def stop_of(samples: Samples, quiet: int = RATE // 10) -> int:
    """End of the first loud run: after its last loud sample, ``quiet`` samples of silence follow."""
    loud = np.nonzero(np.abs(samples.astype(np.int32)) > LOUD)[0]
    gaps = np.nonzero(np.diff(loud) > quiet)[0]
    last = loud[gaps[0]] if len(gaps) else loud[-1]
    return int(last) + 1


def bursts(recording: Samples, signal: Samples, count: int) -> list[tuple[int, int]]:
    """``(start, recorded length)`` of each of ``count`` consecutive cut-off plays of ``signal``."""
    found: list[tuple[int, int]] = []
    pos = 0
    for _ in range(count):
        start, score = find(recording, signal[:HEAD], pos, first_above=0.99)
        if score <= 0.99:
            raise RecordingMismatch(f"burst {len(found)} not found (best correlation {score:.3f})")
        stop = start + stop_of(recording[start:])
        length = stop - start
        # what was recorded up to the stop is the item from its first sample
        _, match = find(recording[start : stop + 24], signal[: length - 24])
        if match <= 0.98:
            raise RecordingMismatch(f"burst {len(found)} is not the signal up to its stop ({match:.3f})")
        found.append((start, length))
        pos = stop
    return found


@dataclass(frozen=True, eq=False)
class CutRun:
    """What :func:`play_and_cut` played, cut and recorded."""

    cuts: list[Cut]
    enqueued_at: list[float]  # the sink's time when each item was handed to the playout
    recording: Samples
    total: int  # samples of each item


def play_and_cut(speaker: str, latency: Latency | float, device_rate: int | None,
                 cut_after: Sequence[float] = CUT_AFTER, seconds: float = 3.0) -> CutRun:
    """Play a chirp once per entry of ``cut_after``, interrupting each that long after it was first heard."""
    signal = chirp(seconds)
    playout = PlayoutBuffer(RATE)
    cuts: list[Cut] = []
    enqueued: list[float] = []
    with MonitorRecorder(f"{speaker}.monitor") as recorder:
        sink = running_sink(playout, block=BLOCK, latency=latency, device_rate=device_rate)
        try:
            for k, after in enumerate(cut_after):
                item = f"a{k}"
                enqueued.append(sink.now())
                playout.enqueue(signal, item)
                playout.mark_complete(item)
                wait_for(lambda: playout.heard_samples(item, 0, sink.now()) > 0, f"{item} to be heard")
                time.sleep(after)  # let it play
                cut = playout.interrupt(sink.now(), fade_ms=FADE_MS)
                if not sink.discard_pending(cut):  # abort + restart: the device drops what it holds
                    raise RecordingMismatch(f"the device kept what it held at cut {k}")
                cuts.append(cut)
                time.sleep(0.4)  # silence between the bursts
            restarts, errors = sink.restarts, sink.callback_errors
        finally:
            sink.close()
        recording = recorder.stop()
    if errors or restarts != len(cut_after):
        raise RecordingMismatch(f"{errors} callback errors and {restarts} restarts for {len(cut_after)} cuts")
    return CutRun(cuts, enqueued, recording, len(signal))
