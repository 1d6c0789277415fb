"""What a :class:`~session.VoiceSession` plays into and captures from.

An *output* owns a :class:`~voxline.audio.playout.PlayoutBuffer` and a listener timeline:

* :class:`~voxline.audio.devices.SpeakerSink` — a sound device, timed by its DAC clock;
* :class:`ClockedOutput` — no device: a clock reads one block per 20 ms into an optional
  :class:`~voxline.audio.sinks.Sink` (a WAV file of what the listener heard, or nothing). Kiosk
  tests and headless runs use it.

An *input* is any async iterable of int16 blocks at 24 kHz (:func:`mic_blocks`,
:func:`file_blocks`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Protocol

import numpy as np

from voxline.base.clock import Clock
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import Sink
from voxline.audio.sources import Source

__all__ = ["ClockedOutput", "Output", "file_blocks", "mic_blocks"]

RATE = 24_000
BLOCK = 480


class Output(Protocol):
    playout: PlayoutBuffer

    def now(self) -> float:
        """The listener's time, on the clock the playout's ledger uses."""

    def discard_pending(self, cut: Cut) -> bool:
        """Keep audio revoked by a barge-in from ever reaching the listener."""


class ClockedOutput:
    """A device-less output: one block of playout per 20 ms of ``clock`` into ``sink``."""

    def __init__(self, clock: Clock, sink: Sink | None = None, *, block: int = BLOCK) -> None:
        self.playout = PlayoutBuffer()
        self._clock = clock
        self._sink = sink
        self._block = block
        self._t0: float | None = None

    def now(self) -> float:
        return 0.0 if self._t0 is None else self._clock.now() - self._t0

    def discard_pending(self, cut: Cut) -> bool:
        if self._sink is not None:
            self._sink.apply_cut(cut.at, cut.end)
        return cut.revoked_samples > 0

    async def run(self) -> None:
        """Play until cancelled."""
        self._t0 = self._clock.now()
        buf = np.zeros(self._block, dtype=np.int16)
        k = 0
        while True:
            t = k * self._block / RATE
            await self._clock.sleep_until(self._t0 + t)
            self.playout.read_into(buf, t)
            if self._sink is not None:
                self._sink.write(t, buf)
            k += 1


async def mic_blocks(mic: AsyncIterable[tuple[float, np.ndarray]]) -> AsyncIterator[np.ndarray]:
    """Blocks from :class:`~voxline.audio.devices.MicSource` (``(adc_time, block)`` pairs)."""
    async for _t, block in mic:
        yield block


async def file_blocks(source: Source) -> AsyncIterator[np.ndarray]:
    """Blocks from a paced :class:`~voxline.audio.sources.Source` (e.g. a WAV file as the microphone)."""
    async for frame in source:
        yield frame.samples
