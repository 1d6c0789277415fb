"""Choosing the server's voice and preparing scripted audio ahead of time."""

from __future__ import annotations

import functools

from voxline.audio.voice import espeak_available, synthesize
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.scenario import Say, Scenario
from voxline.realtime.server.state import Synth

__all__ = ["make_synth", "warm_up"]


def make_synth(voice: str) -> tuple[Synth, str]:
    """A synthesizer for ``voice`` (``auto`` picks espeak-ng when installed, else ``tone``) and its name."""
    if voice == "auto":
        voice = "espeak" if espeak_available() else "tone"
    if voice != "tone" and voice != "espeak" and not voice.startswith("espeak:"):
        raise ConfigurationError(f"unknown voice {voice!r}; use espeak, espeak:<variant> or tone")
    if voice.startswith("espeak") and not espeak_available():
        raise ConfigurationError("espeak-ng is not installed; use --voice tone")
    return functools.partial(synthesize, voice=voice), voice


def warm_up(scenario: Scenario, synth: Synth) -> int:
    """Synthesize every fixed reply of ``scenario`` once (it is cached); return how many."""
    outputs = [o for turn in scenario.turns for o in (*turn.outputs, *(turn.after or ()))]
    outputs.extend(scenario.out_of_band)
    texts = {o.text for o in outputs if isinstance(o, Say) and "{" not in o.text}
    for text in sorted(texts):
        synth(text)
    return len(texts)
