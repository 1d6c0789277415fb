"""``voxline talk --record DIR``: a live session kept for inspection and later replay.

:class:`SessionRecorder` writes into ``DIR``:

* ``MIC.wav`` — the microphone as the session got it, PCM16 mono 24 kHz (usable as the
  input of ``voxline replay``); where capture stopped (a stream that ended and was opened
  again), silence for as long as it stopped (a stop of 100 ms or more), so that the two files stay in step;
* ``HEARD.wav`` — what the listener heard, sample ``n`` at the instant microphone sample
  ``n`` was captured: every block the speaker took from the playout, with each barge-in's
  cut applied (the audio the device abort dropped is not in it);
* ``EVENTS.jsonl`` — the wire and session events (:mod:`voxline.session.eventlog`), times
  in ms from the first microphone sample;
* ``REPORT.html`` and ``SUMMARY.json`` — the session's figures (:mod:`voxline.session.report`).

The speaker reads a :class:`TappedPlayout`, which keeps a copy of each block it hands out
(a bounded queue, filled on the audio thread without locks or waits); the event loop
moves them to HEARD.wav (:meth:`SessionRecorder.drain`).

A file that cannot be written on (a full disk, the 4 GiB a WAV file holds: about 24.8 hours)
stops the recording, never the session: the microphone goes on reaching the session, the
failure is logged once, the files keep what they hold, and :meth:`SessionRecorder.close`
raises it once they are complete.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.recording import WavFeed, watched
from voxline.audio.sinks import WavSink
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock
from voxline.base.errors import OutputError, VoxlineError
from voxline.realtime.errors import ConfigurationError

from .eventlog import EventLog, flushing
from .events import BargeIn, SessionError
from .metrics import MetricsReport
from .report import make_run, write_report

__all__ = ["SessionRecorder", "TappedPlayout"]

_log = logging.getLogger("voxline.record")

_KEEP_BLOCKS = 2048  # about 40 s of 20 ms blocks between two drains
_STOP = round(0.1 * SAMPLE_RATE)
"""A block captured this much later than where MIC.wav has got to follows a stop in capture: it lands where it was
captured. Less is jitter, or dropped blocks (MIC.wav then runs at most this far ahead): a single late timestamp must
not shift the rest of the file, which cannot move back."""


class TappedPlayout(PlayoutBuffer):
    """A playout buffer that also queues a copy of every block it hands out, with its listener time."""

    def __init__(self, rate: int = SAMPLE_RATE, keep_blocks: int = _KEEP_BLOCKS) -> None:
        super().__init__(rate)
        self.handed_out: deque[tuple[float, npt.NDArray[np.int16]]] = deque(maxlen=keep_blocks)

    def read_into(self, out: npt.NDArray[np.int16], play_time: float) -> None:
        super().read_into(out, play_time)
        self.handed_out.append((play_time, out.copy()))


class SessionRecorder:
    """Writes a session into a directory; see the module docstring. Call :meth:`close` once."""

    MIC, HEARD, EVENTS, REPORT, SUMMARY = "MIC.wav", "HEARD.wav", "EVENTS.jsonl", "REPORT.html", "SUMMARY.json"

    def __init__(self, directory: Path, now: Callable[[], float] | None = None) -> None:
        if directory.exists() and not directory.is_dir():
            raise ConfigurationError(f"--record: {directory} is not a directory")
        if not directory.parent.is_dir():
            raise ConfigurationError(f"--record: no such directory {directory.parent}")
        self._made_directory = not directory.exists()
        directory.mkdir(exist_ok=True)
        self.directory = directory
        self.playout = TappedPlayout()
        self.now = now  # the listener clock (the output's now()); set it once the output exists
        self.t0: float | None = None  # listener time of the timeline's sample 0: the first thing recorded
        self._last_now = 0.0
        self._mic = WavSink(directory / self.MIC)
        self._heard = WavSink(directory / self.HEARD)
        self._log = EventLog(directory / self.EVENTS, self._elapsed)
        self._mic_samples = 0
        self._fatal: list[str] = []
        self._closed = False
        self.failure: str | None = None  # why the recording stopped (the session went on)

    def _elapsed(self) -> float:
        now = self.now() if self.now is not None else self._last_now
        return now - self._origin(now)

    def _origin(self, at: float) -> float:
        if self.t0 is None:
            self.t0 = at
        return self.t0

    def mic(self, blocks: AsyncIterable[tuple[float, npt.NDArray[np.int16]]]
            ) -> AsyncIterable[tuple[float, npt.NDArray[np.int16]]]:
        """``(adc_time, block)`` pairs unchanged, each written to MIC.wav as it is handed over (a
        microphone's stepped blocks stay stepped: :func:`~voxline.audio.recording.watched`)."""
        return watched(blocks, self._record_mic)

    def _record_mic(self, item: tuple[float, npt.NDArray[np.int16]]) -> None:
        adc, block = item
        t0 = self._origin(adc)
        self._last_now = adc + len(block) / SAMPLE_RATE
        at = max(0, round((adc - t0) * SAMPLE_RATE))
        if self._mic_samples == 0 or at - self._mic_samples > _STOP:
            self._mic_samples = at  # the first block, and one after capture stopped, land where they were captured
        mic_at = self._mic_samples / SAMPLE_RATE
        self._mic_samples += len(block)
        self._recorded(lambda: self._mic.write(mic_at, np.asarray(block, dtype=np.int16)))
        self.drain()
        self._log.flush_due()  # a block every few ms: the log's lines leave its horizon as they are due

    def _recorded(self, write: Callable[[], None], *, after_a_failure: bool = False) -> None:
        """Make ``write`` unless the recording stopped (or ``after_a_failure``: a file closed all the same); one that
        fails stops it (see the module docstring)."""
        if self.failure is not None and not after_a_failure:
            return
        try:
            write()
        except (VoxlineError, OSError) as exc:
            if self.failure is None:
                self.failure = str(exc) if isinstance(exc, VoxlineError) else f"{exc.strerror or exc}"
                _log.warning("the recording in %s stopped: %s; the session goes on", self.directory, self.failure)

    @contextlib.asynccontextmanager
    async def flushing(self, clock: Clock) -> AsyncIterator[None]:
        """While the block runs, EVENTS.jsonl's lines are written as they leave the log's horizon, a few times a
        second on ``clock``, with or without microphone blocks coming (a microphone gone, a process killed)."""
        async with flushing(self._log, clock):
            yield

    def wire(self, direction: str, text: str) -> None:
        """A :data:`~voxline.realtime.connection.WireObserver` for the session."""
        self._log.wire(direction, text)

    def event(self, event: Any) -> None:
        """A session or tool event: logged; a barge-in's cut is applied to HEARD.wav."""
        at = getattr(event, "at", None)
        t0 = self._origin(at) if isinstance(at, float) else self.t0
        self._log.local(event, None if at is None or t0 is None else at - t0)
        if isinstance(event, SessionError) and event.fatal:
            self._fatal.append(event.message)
        if isinstance(event, BargeIn) and event.cut is not None and t0 is not None:
            cut = event.cut
            self.drain()
            self._recorded(lambda: self._heard.apply_cut(cut.at - t0, cut.end - t0))

    def drain(self) -> None:
        """Move the blocks the speaker took into HEARD.wav."""
        queue = self.playout.handed_out
        while queue:
            play_time, block = queue.popleft()
            at = play_time - self._origin(play_time)
            self._recorded(lambda: self._heard.write(at, block))

    def abandon(self) -> None:
        """Nothing was recorded (the session never started): close the files and remove them, and the
        folder if this recorder made it, so that a failed start leaves no empty recording behind."""
        if self._closed:
            return
        self.failure = self.failure or "abandoned"  # nothing to tell of the files' closing: they go
        self._close_files()
        for name in (self.MIC, self.HEARD, self.EVENTS):
            with contextlib.suppress(OSError):
                (self.directory / name).unlink()
        if self._made_directory:
            with contextlib.suppress(OSError):
                self.directory.rmdir()

    def _close_files(self) -> None:
        """Close the three files, each whatever the others do; the recorder is closed from now on."""
        self._closed = True
        for closing in (self._mic, self._heard, self._log):
            self._recorded(closing.close, after_a_failure=True)

    def close(self, metrics: MetricsReport | None, mode: str = "live") -> list[Path]:
        """Finish the files; with ``metrics``, write the report. Returns the paths written."""
        if self._closed:
            return []
        try:
            self.drain()
        finally:  # a failed drain still leaves the files closed, each a valid WAV or JSON lines
            self._close_files()
        if self.failure is not None:  # the files hold what they held when it stopped: valid, and not the session
            raise OutputError(f"the recording in {self.directory} stopped: {self.failure}")
        paths = [self.directory / name for name in (self.MIC, self.HEARD, self.EVENTS)]
        if metrics is None:
            return paths
        t0 = self.t0 if self.t0 is not None else 0.0
        with WavFeed(self.directory / self.MIC) as mic, WavFeed(self.directory / self.HEARD) as heard:  # streamed
            run = make_run(metrics.shifted(t0), mic, heard, input_name=str(self.directory / self.MIC), mode=mode,
                           duration_s=max(mic.frames, heard.frames) / SAMPLE_RATE, fatal_errors=self._fatal)
        write_report(run, html=self.directory / self.REPORT, summary=self.directory / self.SUMMARY)
        return [*paths, self.directory / self.REPORT, self.directory / self.SUMMARY]
