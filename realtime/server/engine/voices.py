"""The server's voice, and the drivers' side of speech: synthesis happens here, never in the engine.

- :func:`make_synth` picks the voice; :func:`warm_up` voices a scenario's fixed replies
  into a :class:`~voxline.realtime.server.engine.speech.VoiceCache` before any session starts.
- :func:`supply_speech` hands an engine every text it waits for, synchronously (for
  lockstep drivers that call ``receive`` / ``poll`` / ``next_due`` in one thread).
- :class:`~voxline.realtime.server.net.voicer.SpeechSupplier` does the same on an event
  loop, synthesizing with ``asyncio.to_thread`` so espeak-ng never blocks the loop.
- :func:`voice_or_silence` is how both voice a text: a voice that raises is logged and the reply is silence (its
  response streams the transcript without audio and ends with ``response.done``), never the session's end.
"""

from __future__ import annotations

import functools
import logging
from typing import Protocol

import numpy as np

from voxline.audio.synth import VoiceUnavailableError, espeak_available, synthesize
from voxline.realtime.errors import ConfigurationError, UsageError
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.speech import Samples, Synth, VoiceCache

__all__ = ["SpeechDemand", "make_synth", "supply_speech", "voice_or_silence", "warm_up"]

_log = logging.getLogger("voxline.server")


class SpeechDemand(Protocol):
    """The speech side of :class:`~voxline.realtime.server.engine.core.Engine`."""

    def speech_needed(self) -> list[str]: ...

    def provide_speech(self, text: str, samples: Samples, now: float) -> None: ...


def make_synth(voice: str) -> tuple[Synth, str]:
    """A synthesizer for ``voice`` (``auto`` picks espeak-ng when installed, else ``tone``) and its name."""
    if voice == "auto":
        voice = "espeak" if espeak_available() else "tone"
    if voice != "tone" and voice != "espeak" and not voice.startswith("espeak:"):
        raise UsageError(f"unknown voice {voice!r}; use espeak, espeak:<variant> or tone")
    if voice.startswith("espeak") and not espeak_available():
        raise ConfigurationError("espeak-ng is not installed; use --voice tone")
    if voice.startswith("espeak:"):
        try:  # an unknown variant fails here, in one line, not in the first reply
            synthesize("ok", voice=voice)
        except VoiceUnavailableError as exc:
            raise UsageError(f"{exc} (espeak-ng --voices lists them)") from None
    return functools.partial(synthesize, voice=voice), voice


def warm_up(scenario: Scenario, synth: Synth) -> VoiceCache:
    """Voice every fixed reply of ``scenario`` once; the cache is shared by all sessions."""
    return VoiceCache.for_scenario(scenario, synth)


def supply_speech(engine: SpeechDemand, synth: Synth, now: float) -> int:
    """Voice every text ``engine`` waits for and hand it in at ``now``; return how many."""
    needed = engine.speech_needed()
    for text in needed:
        engine.provide_speech(text, voice_or_silence(synth, text), now)
    return len(needed)


def voice_or_silence(synth: Synth, text: str) -> Samples:
    """``synth(text)``, or no samples if the voice raised (logged, without the text: it may quote the user)."""
    try:
        return synth(text)
    except Exception:  # a voice's failure is a silent reply, never the session's end
        _log.exception("the voice failed on a reply of %d characters", len(text))
        return np.zeros(0, dtype=np.int16)
