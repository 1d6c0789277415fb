"""The drivers' speech on an event loop: what an engine waits for, voiced off the loop.

The synchronous side (the voice, :func:`~voxline.realtime.server.engine.voices.supply_speech`
for lockstep drivers) is :mod:`voxline.realtime.server.engine.voices`.

Nothing here ends a session: a synthesizer that raises is logged and its reply is silence
(:func:`~voxline.realtime.server.engine.voices.voice_or_silence`); the engine raising on
the speech handed in (a bug of ours) is logged and told to ``on_failed`` (a session sends one ``server_error``),
and that text is not voiced again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from voxline.base.clock import Clock
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.voices import SpeechDemand, voice_or_silence

__all__ = ["SpeechSupplier"]

_log = logging.getLogger("voxline.server")


class SpeechSupplier:
    """Voices what an engine waits for, off the event loop, one text at a time.

    Call :meth:`check` after every ``receive`` / ``poll``; :meth:`run` (a job of the
    session's task group) synthesizes, hands the speech in at the clock's ``now()`` and
    calls ``on_voiced`` so the pacer looks at ``next_due()`` again. ``on_failed`` is called, inside the
    ``except`` block, when the engine raised on the speech handed in.
    """

    def __init__(self, engine: SpeechDemand, synth: Synth, clock: Clock, on_voiced: Callable[[], None],
                 on_failed: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self._synth = synth
        self._clock = clock
        self._on_voiced = on_voiced
        self._on_failed = on_failed
        self._wanted = asyncio.Event()
        self._refused: set[str] = set()  # texts the engine raised on: not voiced again while still asked for

    def check(self) -> None:
        """Wake :meth:`run` if the engine waits for speech. A text the engine raised on is not asked for again while
        its response waits; once no response asks for it (that one ended), a later one that does is voiced afresh."""
        needed = self._engine.speech_needed()
        if self._refused:
            self._refused.intersection_update(needed)
        if needed:
            self._wanted.set()

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            for text in self._engine.speech_needed():
                if text not in self._engine.speech_needed() or text in self._refused:
                    continue  # its response ended while an earlier text was being voiced, or the engine failed on it
                samples = await asyncio.to_thread(voice_or_silence, self._synth, text)
                try:
                    self._engine.provide_speech(text, samples, self._clock.now())
                except Exception:  # as on a client frame: said, and the session goes on
                    self._refused.add(text)
                    if self._on_failed is not None:
                        self._on_failed()
                    else:
                        _log.exception("the engine failed on the speech of a reply")
                self._on_voiced()
