"""The speaker: a PortAudio output stream that plays a :class:`~voxline.audio.playout.PlayoutBuffer`.

**Timeline.** The heard ledger runs on PortAudio's stream clock: each callback hands the
playout the DAC time of its block (``outputBufferDacTime``, made continuous by
:class:`~voxline.audio.device_timing.DacTimeline`; ``currentTime + latency`` where a host reports
0), and :meth:`SpeakerSink.now` is ``stream.time``, the same clock (on ALSA it reads the
wall clock). A barge-in therefore reads ``cut = playout.interrupt(sink.now(), fade_ms)``.

**Warm-up.** When a stream starts (or recovers from an underflow) PortAudio fills the
device buffer with several callbacks in a row, stamped as if the device ran at once; some
servers start it much later (a PulseAudio null sink: 0.6–1.5 s). Those blocks are
silence and the playout is not read until a callback comes half a block or more after the
first: audio is never stamped with a time at which it did not play.

**Barge-in.** Samples handed to the device with a listener time after the fade were
revoked from the ledger by the interrupt; :meth:`SpeakerSink.discard_pending` makes sure
they never play: it aborts the stream (PortAudio's abort drops the device buffer; over
PulseAudio's ALSA plugin that is a cork and flush of the server stream) and starts it
again. :meth:`SpeakerSink.interrupt` does both steps. A stream the sound server moved off a
device that went (:meth:`SpeakerSink.displaced`, said by a session's device watch) is replaced by
a fresh one instead: over that plugin its start would never return.

**An ended stream.** When the sound server kills the stream or the device fails, PortAudio
ends it: :attr:`SpeakerSink.ended` says so and :meth:`SpeakerSink.reopen` starts a fresh one on
the same device, the playout going on where it stopped (a session watching its devices does it,
:mod:`voxline.audio.stream_keeper`). A barge-in's restart that fails leaves the stream ended.

**Rate.** The stream opens at 24 kHz when the device accepts it (PulseAudio and PipeWire
do); otherwise at the device's default rate through :class:`~voxline.audio.device_resample.PlayoutReader`.

**Callback.** int16 mono; it never blocks beyond the playout's short lock and never
raises: an exception is counted (:attr:`SpeakerSink.callback_errors`) and the block is
silence. Device underflows reported by PortAudio are counted apart
(:attr:`SpeakerSink.device_underflows`) from the playout's own underruns.
"""
from __future__ import annotations

import logging
import uuid
from types import TracebackType
from typing import Any, Literal, Self

from voxline.audio.device_list import (Latency, load_sounddevice, open_error, open_stream, pick_rate, resolve_device,
                                       stream_options)
from voxline.audio.device_stream import ReopenableStream
from voxline.audio.device_resample import PlayoutReader
from voxline.audio.device_timing import DacTimeline, dac_time
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer

__all__ = ["SpeakerSink"]

_MAX_WARMUP_BLOCKS = 32  # a host whose clock reads 0 still gets going
_log = logging.getLogger(__name__)


class SpeakerSink(ReopenableStream):
    """Plays a playout buffer on an output device; see the module docstring."""

    kind: Literal["output"] = "output"  # what a device watch (voxline.audio.device_watch) calls its streams
    _what = "speaker"

    discard_blocks = True  # an abort and restart of the stream takes milliseconds

    def __init__(
        self,
        playout: PlayoutBuffer,
        device: int | str | None = None,
        block: int = 480,
        rate: int = SAMPLE_RATE,
        latency: Latency = "low",
        *,
        device_rate: int | None = None,
    ) -> None:
        stream_options("SpeakerSink", block, rate, latency, device_rate)
        if rate != playout.rate:
            raise AudioError(f"the sink runs at {rate} Hz but the playout buffer at {playout.rate} Hz")
        self.playout = playout
        self.rate = rate
        self.block = block
        self.latency = latency
        self.device = resolve_device(device, "output")
        self._sd = load_sounddevice()
        self.tag = uuid.uuid4().hex[:12]  # finds this stream on the sound server (voxline.audio.device_watch)
        self.device_rate = pick_rate(self.device, "output", rate, device_rate)
        self._reader = PlayoutReader(playout, self.device_rate) if self.device_rate != rate else None
        self._timeline = DacTimeline(self.device_rate)
        self._init_stream()
        self._stopped_at: float | None = None  # the stream clock when it was closed: the listener's time stops there
        self._last_now: float | None = None  # the stream clock last read: where a stream left stuck stopped
        self._stream_latency = 0.0
        self._warm_from: float | None = None  # currentTime of the first callback since start
        self._warm = False
        self._warm_count = 0
        self.callback_errors = 0
        self.last_callback_error: str | None = None
        self.device_underflows = 0
        self.callbacks = 0
        self.warmup_blocks = 0
        self.restarts = 0

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Open the stream (once) and start it."""
        with self._control:
            if self._stream is None:
                self._stream = self._open()
            if not self._stream.active:
                self._restart_state()
                self._guarded(self._stream.start)

    def _open(self, fallback: bool = False) -> Any:
        stream = open_stream(self.device, "output", device_rate=self.device_rate, block=self.block,
                             rate=self.rate, latency=self.latency, callback=self._callback, tag=self.tag,
                             fallback=fallback)
        self._stream_latency = float(stream.latency)
        return stream

    def _guarded(self, action: Any) -> None:
        try:
            action()
        except self._sd.PortAudioError as exc:
            raise open_error(self.device, "output", exc) from None

    def close(self) -> None:
        """Stop at once (abort) and release the device; idempotent. A stream whose driver holds it past
        :data:`~voxline.audio.device_stream.LOCK_WAIT_S` is left to it (one line) rather than waited for."""
        with self._holding() as taken:
            stream, self._stream = self._stream, None  # taken or not, nothing here touches it again
        if taken:
            self._release_retired()
        if stream is None:
            return
        if not taken:  # its clock is not read either: the listener's time stops where it was last read
            self._stopped_at = self._last_now if self._last_now is not None else 0.0
            self._left_stuck(stream)
            return

        stopped = self._shut(stream, lambda: float(stream.time))
        if stopped is not None:
            self._stopped_at = stopped
        elif self._last_now is not None or self._stuck is stream:  # no last read: where its clock was read before
            self._stopped_at = self._last_now if self._last_now is not None else 0.0

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- clock and barge-in ------------------------------------------------------------

    def now(self) -> float:
        """The stream clock (``Pa_GetStreamTime``): the ledger's timeline. Once closed, where it stopped (a session's
        figures and a recording are completed after the devices closed)."""
        stream = self._stream
        if stream is None:
            if self._stopped_at is not None:
                return self._stopped_at
            raise AudioError("the speaker stream is not open")
        try:
            self._last_now = now = float(stream.time)
        except self._sd.PortAudioError as exc:  # its device vanished: the clock stands where it was last read
            if self._last_now is not None:
                return self._last_now
            raise AudioError(f"the speaker's clock cannot be read: {exc}") from None
        return now

    def interrupt(self, fade_ms: float = 5.0) -> Cut:
        """Barge-in: cut the playout now with a fade, then drop what the device still holds."""
        cut = self.playout.interrupt(self.now(), fade_ms)
        self.discard_pending(cut)
        return cut

    def discard_pending(self, cut: Cut) -> bool:
        """Make revoked samples never reach the listener: abort and restart the stream.

        Nothing to do (and no restart) when the cut revoked nothing. Blocks the caller
        for the abort and restart (a few milliseconds); returns True if it restarted.
        """
        if cut.revoked_samples == 0:
            return False
        with self._holding() as taken:
            stream = self._stream
            if not taken or stream is None:  # held past its wait by a call that never returned, or closed
                return False
            stream.abort()
            self._restart_state()
            self.restarts += 1
            replace = self._displaced
            if not replace:
                try:
                    stream.start()
                except self._sd.PortAudioError as exc:  # the device failed between the two: the stream stays ended
                    _log.warning("the speaker stream did not start again after a barge-in: %s", exc)
                self._reclaimed(stream)  # a close that gave it up meanwhile (the start took seconds): closed now
        if replace:  # aborted, it is an ended stream: a fresh one in its place, opened outside the lock as any reopen
            self.reopen()  # none opening leaves it ended, for the stream keeper's next poll
        return True

    def displaced(self) -> None:
        """The sound server moved the stream off its device, which went (unplugged): its next barge-in opens a fresh
        stream instead of starting this one again. Over PulseAudio's ALSA plugin such a stream aborts, but its start
        never returns, and nothing would play for the rest of the session. Called by a session's device watch."""
        self._displaced = True

    def _fresh_state(self) -> None:
        self._restart_state()

    def _restart_state(self) -> None:
        """Forget the timeline and the warm-up; drop resampled audio (stream stopped)."""
        if self._reader is not None:
            self._reader.reset()
        self._timeline.reset()
        self._warm_from = None
        self._warm = False
        self._warm_count = 0

    # -- audio thread ------------------------------------------------------------------

    def _warming(self, current: float, frames: int) -> bool:
        """True while PortAudio fills the device buffer before the device runs.

        Those first blocks all come at once, stamped as if the device had started; some
        servers start it much later (PulseAudio null sinks: up to 1.5 s), so they carry
        silence and the playout is read from the first block that arrives a block later.
        """
        if self._warm:
            return False
        if self._warm_from is None:
            self._warm_from = current
        if current - self._warm_from < 0.5 * frames / self.device_rate and self._warm_count < _MAX_WARMUP_BLOCKS:
            self._warm_count += 1
            return True
        self._warm = True
        return False

    def _callback(self, outdata: Any, frames: int, time: Any, status: Any) -> None:
        try:
            self.callbacks += 1
            if status.output_underflow:
                self.device_underflows += 1
                self._warm, self._warm_from, self._warm_count = False, None, 0  # the device refills and restarts
            current = time.currentTime if time.currentTime > 0 else self._stream_time()
            if self._warming(current, frames):
                self.warmup_blocks += 1
                outdata.fill(0)
                return
            dac = dac_time(time.outputBufferDacTime, current, self._stream_latency)
            start = self._timeline.place(dac, frames)
            if self._reader is None:
                self.playout.read_into(outdata[:, 0], start)
            else:
                self._reader.read_into(outdata[:, 0], start)
        except Exception as exc:  # the callback guard: count, play silence, never raise into PortAudio
            self.callback_errors += 1
            self.last_callback_error = f"{type(exc).__name__}: {exc}"
            outdata.fill(0)

    def _stream_time(self) -> float:
        stream = self._stream
        return float(stream.time) if stream is not None else 0.0

    # -- figures -----------------------------------------------------------------------

    @property
    def active(self) -> bool:
        stream = self._stream
        return bool(stream is not None and stream.active)

    @property
    def running(self) -> bool:
        """The stream is active and past its warm-up: the device is consuming blocks."""
        return self.active and self._warm

    @property
    def output_latency(self) -> float:
        """The stream's reported output latency in seconds (0 before it is opened)."""
        return self._stream_latency

    @property
    def timeline_jumps(self) -> int:
        """Times the DAC timeline was re-anchored (underflows, restarts)."""
        return self._timeline.jumps
