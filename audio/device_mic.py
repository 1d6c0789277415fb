"""The microphone: a PortAudio input stream delivering timestamped int16 blocks to asyncio.

The callback copies each block and hands it to the event loop with
``loop.call_soon_threadsafe``; on the loop it goes into a bounded queue that drops its
oldest block when full (counted in :attr:`MicSource.dropped_blocks`). A session reading the
blocks by steps of its loop's stepper (:class:`MicBlocks` as a
:class:`~voxline.audio.recording.SteppedInput`) has the callback append them to a bounded
deque instead, which each step empties: no loop wake-up and no task wake-up per block, the
step due a block period after the last block arrived. The callback never blocks and never
raises (errors are counted, the block is dropped).

Each block carries its capture time: PortAudio's ``inputBufferAdcTime`` on the stream
clock (``currentTime − latency`` where a host reports 0), comparable with the speaker's
DAC times (:meth:`voxline.audio.device_speaker.SpeakerSink.now`). The stream opens at 24 kHz when
the device accepts it; otherwise at its default rate, resampled to 24 kHz (then block
lengths vary by a few samples around ``block``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections import deque
from time import monotonic
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

from voxline.audio.device_list import (Latency, load_sounddevice, open_error, open_stream, pick_rate, resolve_device,
                                       stream_options)
from voxline.audio.device_stream import ReopenableStream
from voxline.audio.device_resample import CaptureResampler
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.arguments import as_error, whole
from voxline.base.clock import RealClock
from voxline.base.errors import AudioError

__all__ = ["MicBlocks", "MicSource"]

Samples = npt.NDArray[np.int16]
_END = None
_log = logging.getLogger(__name__)
_STEP_MARGIN_S = 0.002  # a step comes this long after a block is expected, to find it there


class MicSource(ReopenableStream):
    """Captures an input device; iterate :meth:`blocks` for ``(adc_time, samples)``.

    ``rate`` is the rate of the blocks: 24 kHz, what a session takes (a session refuses another
    rate's blocks); another rate serves an app's own use of the microphone."""

    kind: Literal["input"] = "input"  # what a device watch (voxline.audio.device_watch) calls its streams
    _what = "microphone"

    def __init__(
        self,
        device: int | str | None = None,
        block: int = 480,
        rate: int = SAMPLE_RATE,
        *,
        max_blocks: int = 100,
        latency: Latency = "low",
        device_rate: int | None = None,
    ) -> None:
        stream_options("MicSource", block, rate, latency, device_rate)
        with as_error(AudioError, "MicSource"):
            whole(max_blocks, "max_blocks", low=1)
        self.rate = rate
        self.block = block
        self.latency = latency
        self.device = resolve_device(device, "input")
        self._sd = load_sounddevice()
        self.tag = uuid.uuid4().hex[:12]  # finds this stream on the sound server (voxline.audio.device_watch)
        self.device_rate = pick_rate(self.device, "input", rate, device_rate)
        self._resampler = CaptureResampler(self.device_rate, rate) if self.device_rate != rate else None
        self._init_stream()
        self.max_blocks = max_blocks
        self._queue: asyncio.Queue[tuple[float, Samples] | None] = asyncio.Queue()  # bounded by _deliver
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stream_latency = 0.0
        self._closed = False
        self.dropped_blocks = 0
        self.callback_errors = 0
        self.last_callback_error: str | None = None
        self.input_overflows = 0
        self.blocks_captured = 0
        self._direct: deque[tuple[float, Samples] | None] | None = None  # filled by the callback once stepped
        self._arrived = -math.inf  # monotonic time of the last block the callback appended

    # -- lifecycle (event loop) --------------------------------------------------------

    def start(self) -> None:
        """Open and start the stream; call from the event loop that will read :meth:`blocks`."""
        if self._closed:
            raise AudioError("the microphone was closed")
        self._loop = asyncio.get_running_loop()
        sd = self._sd
        with self._control:
            if self._stream is None:
                self._stream = self._open()
            if self._stream.active:
                return
            try:
                self._stream.start()
            except sd.PortAudioError as exc:
                raise open_error(self.device, "input", exc) from None

    def _open(self, fallback: bool = False) -> Any:
        stream = open_stream(self.device, "input", device_rate=self.device_rate, block=self.block, rate=self.rate,
                             latency=self.latency, callback=self._callback, tag=self.tag, fallback=fallback)
        self._stream_latency = float(stream.latency)
        return stream

    def close(self) -> None:
        """Stop capturing; :meth:`blocks` ends after the blocks already queued. Idempotent."""
        with self._holding() as taken:
            if self._closed:
                return
            self._closed = True
            stream, self._stream = self._stream, None  # taken or not, nothing here touches it again
        if taken:
            self._release_retired()
        if stream is not None and not taken:
            self._left_stuck(stream)
        elif stream is not None:
            self._shut(stream)
        if self._loop is not None:
            # after every block already scheduled by the callback; from any thread (a session closes its devices
            # off the loop); a loop already closed has nobody to tell
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._deliver, _END)

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _fresh_state(self) -> None:
        """A fresh stream's first block follows no earlier one: nothing of the ended stream's is carried into it."""
        if self._resampler is not None:
            self._resampler = CaptureResampler(self.device_rate, self.rate)

    def _gone(self) -> bool:
        return self._closed or self._stream is None

    def blocks(self) -> MicBlocks:
        """``(adc_time, int16 block)`` in capture order, until :meth:`close`: iterate it, or step it."""
        return MicBlocks(self)

    async def _queued(self) -> AsyncIterator[tuple[float, Samples]]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    def now(self) -> float:
        """The stream clock (the clock of the ADC times)."""
        stream = self._stream
        if stream is None:
            raise AudioError("the microphone stream is not open")
        return float(stream.time)

    # -- event loop side of the hand-over ----------------------------------------------

    def _deliver(self, item: tuple[float, Samples] | None) -> None:
        """Queue a block (dropping the oldest beyond ``max_blocks``) or the end marker."""
        direct = self._direct
        if direct is not None:  # stepped: a block handed over before the switch, or the end
            direct.append(item)
            return
        if item is not _END and self._queue.qsize() >= self.max_blocks:
            self._queue.get_nowait()
            self.dropped_blocks += 1
        self._queue.put_nowait(item)

    # -- audio thread ------------------------------------------------------------------

    def _callback(self, indata: Any, frames: int, time: Any, status: Any) -> None:
        try:
            if status.input_overflow:
                self.input_overflows += 1
            adc = time.inputBufferAdcTime
            if adc <= 0:
                adc = time.currentTime - self._stream_latency
            block: Samples = indata[:, 0].copy()
            if self._resampler is not None:
                adc, block = self._resampler.process(block, adc)
                if not len(block):
                    return
            loop = self._loop
            if loop is not None and not self._closed:
                direct = self._direct
                if direct is not None:  # a stepper empties it: nothing to wake
                    if len(direct) >= self.max_blocks:
                        self.dropped_blocks += 1  # the deque drops its oldest
                    direct.append((adc, block))
                    self._arrived = monotonic()
                else:
                    loop.call_soon_threadsafe(self._deliver, (adc, block))
                self.blocks_captured += 1
        except Exception as exc:  # the callback guard: count, drop the block, never raise into PortAudio
            self.callback_errors += 1
            self.last_callback_error = f"{type(exc).__name__}: {exc}"


class MicBlocks:
    """A microphone's ``(adc_time, block)`` pairs: an async iterable, or an input a stepper reads.

    Iterated, blocks come through the loop's queue, a wake-up each. Stepped
    (:class:`~voxline.audio.recording.SteppedInput`: :attr:`due`, :meth:`take`), the callback
    appends them to a deque that each step empties; the first :attr:`due` switches to it (blocks
    already queued come first; a block handed over in the switch after a later one is dropped,
    counted in :attr:`MicSource.dropped_blocks`). Use one way or the other, not both.
    """

    def __init__(self, mic: MicSource) -> None:
        self._mic = mic
        self.clock = RealClock()  # the loop's: the callback stamps arrivals with time.monotonic()
        self._last_adc = -math.inf
        self._ended = False

    @property
    def capture_rate(self) -> int:
        """The rate of the blocks (the microphone's ``rate``): a session takes 24 kHz only."""
        return self._mic.rate

    def __aiter__(self) -> AsyncIterator[tuple[float, Samples]]:
        return self._mic._queued()

    def _switch(self) -> deque[tuple[float, Samples] | None]:
        mic = self._mic
        direct = mic._direct
        if direct is None:
            direct = deque(maxlen=mic.max_blocks + 1)
            while not mic._queue.empty():  # delivered before the switch: in order, first
                direct.append(mic._queue.get_nowait())
            mic._direct = direct
        return direct

    @property
    def due(self) -> float | None:
        """Now if blocks wait; else a block period after the last one arrived (a quarter period while none comes).

        Reading it changes nothing (an ``isinstance`` check against a protocol reads it on Python 3.11):
        before the first :meth:`take` it is now, and that take switches the blocks to the deque."""
        direct = self._mic._direct
        if direct is None:
            return self.clock.now()
        if self._ended and not direct:
            return None
        now = self.clock.now()
        if direct:
            return now
        mic = self._mic
        period = mic.block / mic.rate
        expected = mic._arrived + period + _STEP_MARGIN_S
        return expected if expected > now else now + period / 4

    def take(self, now: float) -> list[tuple[float, Samples]]:
        """The blocks captured so far, in capture order."""
        direct = self._switch()
        out: list[tuple[float, Samples]] = []
        while direct:
            item = direct.popleft()
            if item is _END:
                self._ended = True
                continue
            if item[0] <= self._last_adc:
                self._mic.dropped_blocks += 1  # overtaken in the switch
                continue
            self._last_adc = item[0]
            out.append(item)
        return out
