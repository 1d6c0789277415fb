"""The drivers' speech on an event loop: what an engine waits for, voiced off the loop.

The synchronous side (the voice, :func:`~voxline.realtime.server.engine.voices.supply_speech`
for lockstep drivers) is :mod:`voxline.realtime.server.engine.voices`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from voxline.base.clock import Clock
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.voices import SpeechDemand

__all__ = ["SpeechSupplier"]


class SpeechSupplier:
    """Voices what an engine waits for, off the event loop, one text at a time.

    Call :meth:`check` after every ``receive`` / ``poll``; :meth:`run` (a job of the
    session's task group) synthesizes, hands the speech in at the clock's ``now()`` and
    calls ``on_voiced`` so the pacer looks at ``next_due()`` again.
    """

    def __init__(self, engine: SpeechDemand, synth: Synth, clock: Clock, on_voiced: Callable[[], None]) -> None:
        self._engine = engine
        self._synth = synth
        self._clock = clock
        self._on_voiced = on_voiced
        self._wanted = asyncio.Event()

    def check(self) -> None:
        """Wake :meth:`run` if the engine waits for speech."""
        if self._engine.speech_needed():
            self._wanted.set()

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            for text in self._engine.speech_needed():
                if text not in self._engine.speech_needed():
                    continue  # its response ended while an earlier text was being voiced
                samples = await asyncio.to_thread(self._synth, text)
                self._engine.provide_speech(text, samples, self._clock.now())
                self._on_voiced()
