"""The microphone: a PortAudio input stream delivering timestamped int16 blocks to asyncio.

The callback copies each block and hands it to the event loop with
``loop.call_soon_threadsafe``; on the loop it goes into a bounded queue that drops its
oldest block when full (counted in :attr:`MicSource.dropped_blocks`). The callback never
blocks and never raises (errors are counted, the block is dropped).

Each block carries its capture time: PortAudio's ``inputBufferAdcTime`` on the stream
clock (``currentTime − latency`` where a host reports 0), comparable with the speaker's
DAC times (:meth:`voxline.audio.device_speaker.SpeakerSink.now`). The stream opens at 24 kHz when
the device accepts it; otherwise at its default rate, resampled to 24 kHz (then block
lengths vary by a few samples around ``block``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

from voxline.audio.device_list import Latency, load_sounddevice, open_error, open_stream, pick_rate, resolve_device
from voxline.audio.device_resample import CaptureResampler
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

__all__ = ["MicSource"]

Samples = npt.NDArray[np.int16]
_END = None


class MicSource:
    """Captures an input device; iterate :meth:`blocks` for ``(adc_time, samples)``."""

    kind: Literal["input"] = "input"  # what a device watch (voxline.audio.device_watch) calls its streams

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
        self.rate = rate
        self.block = block
        self.latency = latency
        self.device = resolve_device(device, "input")
        self._sd = load_sounddevice()
        self.tag = uuid.uuid4().hex[:12]  # finds this stream on the sound server (voxline.audio.device_watch)
        self.device_rate = pick_rate(self.device, "input", rate, device_rate)
        self._resampler = CaptureResampler(self.device_rate, rate) if self.device_rate != rate else None
        self.max_blocks = max_blocks
        self._queue: asyncio.Queue[tuple[float, Samples] | None] = asyncio.Queue()  # bounded by _deliver
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stream: Any = None
        self._stream_latency = 0.0
        self._closed = False
        self.dropped_blocks = 0
        self.callback_errors = 0
        self.last_callback_error: str | None = None
        self.input_overflows = 0
        self.blocks_captured = 0

    # -- lifecycle (event loop) --------------------------------------------------------

    def start(self) -> None:
        """Open and start the stream; call from the event loop that will read :meth:`blocks`."""
        if self._closed:
            raise AudioError("the microphone was closed")
        self._loop = asyncio.get_running_loop()
        sd = self._sd
        if self._stream is None:
            self._stream = open_stream(self.device, "input", device_rate=self.device_rate, block=self.block,
                                       rate=self.rate, latency=self.latency, callback=self._callback, tag=self.tag)
            self._stream_latency = float(self._stream.latency)
        if self._stream.active:
            return
        try:
            self._stream.start()
        except sd.PortAudioError as exc:
            raise open_error(self.device, "input", exc) from None

    def close(self) -> None:
        """Stop capturing; :meth:`blocks` ends after the blocks already queued. Idempotent."""
        if self._closed:
            return
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.abort()
            stream.close()
        if self._loop is not None:
            # after every block already scheduled by the callback
            self._loop.call_soon(self._deliver, _END)

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def blocks(self) -> AsyncIterator[tuple[float, Samples]]:
        """``(adc_time, int16 block)`` in capture order, until :meth:`close`."""
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
                loop.call_soon_threadsafe(self._deliver, (adc, block))
                self.blocks_captured += 1
        except Exception as exc:  # the callback guard: count, drop the block, never raise into PortAudio
            self.callback_errors += 1
            self.last_callback_error = f"{type(exc).__name__}: {exc}"
