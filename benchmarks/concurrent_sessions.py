"""What the concurrent benchmarks share: the workload, the server in its own process, and N voxline sessions at once.

:mod:`benchmarks.bench_concurrent` (the table), :mod:`benchmarks.concurrent_at_once` (clients run at
the same time) and :mod:`benchmarks.concurrent_paths` (where the client's CPU goes) all run the same
sessions against the same kind of server: a recording replayed in real time over the ``long``
scenario, barging in over a reply streamed at 4x real time, each session writing its heard WAV.
Clients and server run on the event loop voxline's commands run on (:func:`run_on_command_loop`:
asyncio's own, or uvloop with ``VOXLINE_EVENT_LOOP=uvloop``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import SecretStr

from voxline.audio.sinks import NullSink, Sink, WavSink
from voxline.base.clock import RealClock
from voxline.base.loop_runner import bounded_runner, real_time_loop
from voxline.realtime.server import load_scenario
from voxline.realtime.server.engine.scenario import Say
from voxline.realtime.server.engine.voices import make_synth
from voxline.session.events import SessionError
from voxline.session.replay import run_replay
from voxline.session.replay.result import ReplayResult
from voxline.session.settings import SessionSettings

__all__ = ["PROBE_S", "RATE", "RECORDING", "SCENARIO", "TAIL_S", "VOICE", "WARM_UP_SAMPLES", "Probe", "Server",
           "Workload", "event_loop", "failure", "load_average", "process_cpu_s", "rss_bytes", "run_on_command_loop",
           "run_seconds", "settings_for", "voxline_sessions"]

RECORDING = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"
RATE = 24_000  # the recording's and the sessions' sample rate
PROBE_S = 0.010
WARM_UP_SAMPLES = 12_000  # half a second of the recording
TAIL_S = 2.0  # as examples/interruption_test.py: the replay ends at most 2 s after the input
VOICE = "auto"  # the server's voice: espeak where installed, else the tone (same replies in lockstep and real time)
SCENARIO = "long"  # replies of many seconds: the reply streams ahead of real time while the user talks over it
_URL = re.compile(r"at (ws://\S+?)/realtime\b")
_TICK = os.sysconf("SC_CLK_TCK")

T = TypeVar("T")


def run_on_command_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on a fresh loop of the kind voxline's commands run on (``voxline serve`` and a farm's parts)."""
    with bounded_runner(None) as runner:
        return runner.run(main)


def event_loop() -> str:
    """The name of the loop :func:`run_on_command_loop` runs on here: ``uvloop`` or ``asyncio``."""
    return "asyncio" if real_time_loop() is None else "uvloop"


def run_seconds(samples: npt.NDArray[np.int16], tail_s: float) -> float:
    """How long a session of ``samples`` and ``tail_s`` lasts: what a bare receiver or a peer's session runs for."""
    return round(len(samples) / RATE + tail_s, 2)


def failure(result: ReplayResult | BaseException) -> str | None:
    """Why a session counts as failed (it raised, or reported a fatal ``SessionError``), or None."""
    if isinstance(result, BaseException):
        return f"{type(result).__name__}: {result}"[:200]
    fatal = next((e for e in result.events if isinstance(e, SessionError) and e.fatal), None)
    return None if fatal is None else f"SessionError: {fatal}"[:200]


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


def settings_for(url: str, liveness_timeout_s: float | None = None) -> SessionSettings:
    extra: dict[str, Any] = {} if liveness_timeout_s is None else {"liveness_timeout_s": liveness_timeout_s}
    return SessionSettings(url=url, api_key=SecretStr("local"), turn_detection="server_vad", transcribe=False, **extra)


@dataclass(frozen=True)
class Workload:
    """What the server answers with and in which voice, and whether each session writes its heard WAV."""

    scenario: str = SCENARIO
    voice: str = VOICE
    wav: bool = True
    levers_off: tuple[str, ...] = ()  # client levers undone (:mod:`benchmarks.concurrent_levers`)
    server_python: str | None = None  # the interpreter running ``voxline serve`` (another checkout's)

    def resolved(self) -> Workload:
        """The same with ``auto`` replaced by the voice it picks here (espeak or tone)."""
        return dataclasses.replace(self, voice=make_synth(self.voice)[1])

    def first_reply(self) -> npt.NDArray[np.int16]:
        """The samples of the scenario's first spoken reply (the one the barge-in cuts), as the server voices it."""
        scenario = load_scenario(self.scenario)
        say = next(o for o in scenario.turns[0].outputs if isinstance(o, Say))
        return np.asarray(make_synth(self.voice)[0](say.text), dtype=np.int16)



class Server:
    """``voxline serve --port 0`` in a separate process; :attr:`url` once it listens."""

    def __init__(self, *, timeout_s: float = 30.0, workload: Workload = Workload()) -> None:
        command = [workload.server_python or sys.executable, "-m", "voxline", "serve", "--port", "0", "--voice", workload.voice,
                   "--scenario", workload.scenario]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.url = self._read_url(timeout_s)
        self._drain = threading.Thread(target=self._discard, daemon=True)  # keep the pipe from filling
        self._drain.start()

    def _read_url(self, timeout_s: float) -> str:
        assert self.process.stdout is not None
        found: list[str] = []
        seen: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                seen.append(line.rstrip())
                if match := _URL.search(line):
                    found.append(match.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not found:
            self.stop()
            raise RuntimeError(f"voxline serve printed no URL within {timeout_s:.0f} s: {' | '.join(seen[-5:])}")
        return found[0]

    def _discard(self) -> None:
        assert self.process.stdout is not None
        for _line in self.process.stdout:
            pass

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_s(self) -> float:
        return process_cpu_s(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Probe:
    lags: list[float]
    peak_rss: int


async def _probe(stop: asyncio.Event, probe: Probe) -> None:
    # the lag in real time, as the sessions' clock reads it (time.monotonic(): asyncio's loop.time(); uvloop's
    # is the same clock in whole milliseconds)
    k = 0
    while not stop.is_set():
        asked = time.monotonic() + PROBE_S
        await asyncio.sleep(PROBE_S)
        probe.lags.append(max(0.0, time.monotonic() - asked))
        k += 1
        if k % 50 == 0:
            probe.peak_rss = max(probe.peak_rss, rss_bytes())


async def voxline_sessions(n: int, url: str, samples: npt.NDArray[np.int16], tail_s: float,
                    liveness_timeout_s: float | None, wav_dir: Path | None = None, levers_off: Sequence[str] = ()
                    ) -> tuple[list[ReplayResult | BaseException], Probe]:
    clock = RealClock()
    stop = asyncio.Event()
    probe = Probe([], rss_bytes())
    prober = asyncio.create_task(_probe(stop, probe))
    sinks: list[Sink] = [NullSink() if wav_dir is None else WavSink(wav_dir / f"heard-{k:04d}.wav") for k in range(n)]
    settings = settings_for(url, liveness_timeout_s)
    connector, on_session = None, None
    if levers_off:  # imported only then: it names the levers, which an older checkout measured alone lacks
        from .concurrent_levers import clock_for, hooks

        connector, on_session = hooks(levers_off, settings)
        clock = clock_for(levers_off)
    runs = [run_replay(samples, connector=connector, clock=clock, settings=settings, sink=sink, tail_s=tail_s,
                       on_session=on_session)
            for sink in sinks]
    try:
        results = await asyncio.gather(*runs, return_exceptions=True)
    finally:
        stop.set()
        await prober
        for sink in sinks:
            sink.close()
    probe.peak_rss = max(probe.peak_rss, rss_bytes())
    return list(results), probe
