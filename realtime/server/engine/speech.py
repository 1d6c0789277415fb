"""Scripted speech as the engine sees it: a voice cache it only reads, never a synthesizer.

The engine voices a reply (``response.output_audio.delta``) from a :class:`VoiceCache`
filled before the session starts, normally with every fixed reply of the scenario
(:meth:`VoiceCache.for_scenario`). A text the cache does not hold (a reply with
placeholders such as ``{user_text}``, or one cut by ``max_output_tokens``) keeps its
response waiting after ``response.created``: ``Engine.speech_needed()`` lists it until the
driver hands the samples in with ``Engine.provide_speech(text, samples, now)``.
:mod:`voxline.realtime.server.engine.voices` has the drivers' side of this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from voxline.realtime.server.engine.scenario import Say, Scenario

__all__ = ["Samples", "Synth", "VoiceCache", "fixed_texts"]

Samples = npt.NDArray[np.int16]

Synth = Callable[[str], Samples]
"""Text → int16 samples at 24 kHz mono (``voxline.audio.synth.synthesize`` with a voice bound)."""


def fixed_texts(scenario: Scenario) -> list[str]:
    """Every reply of ``scenario`` that can be voiced ahead of time (no placeholders), sorted."""
    replies = [(turn.outputs, turn.after) for turn in scenario.turns]
    replies += [(branch.outputs, branch.after) for turn in scenario.turns for branch in turn.branches]
    outputs = [o for reply, after in replies for o in (*reply, *(after or ()))]
    outputs.extend(scenario.out_of_band)
    return sorted({o.text for o in outputs if isinstance(o, Say) and "{" not in o.text})


class VoiceCache:
    """Texts already voiced: text → int16 samples at 24 kHz mono, read-only once stored."""

    def __init__(self, voiced: Mapping[str, Samples] | None = None) -> None:
        self._voiced: dict[str, Samples] = {}
        for text, samples in (voiced or {}).items():
            self.put(text, samples)

    @classmethod
    def for_scenario(cls, scenario: Scenario, synth: Synth) -> VoiceCache:
        """A cache holding every fixed reply of ``scenario``, voiced by ``synth`` now."""
        cache = cls()
        cache.fill(fixed_texts(scenario), synth)
        return cache

    def get(self, text: str) -> Samples | None:
        return self._voiced.get(text)

    def put(self, text: str, samples: npt.ArrayLike) -> None:
        array = np.array(samples, dtype=np.int16)
        array.flags.writeable = False
        self._voiced[text] = array

    def fill(self, texts: Iterable[str], synth: Synth) -> int:
        """Voice every text not held yet; return how many were voiced."""
        missing = [text for text in texts if text not in self._voiced]
        for text in missing:
            self.put(text, synth(text))
        return len(missing)

    def __contains__(self, text: object) -> bool:
        return text in self._voiced

    def __iter__(self) -> Iterator[str]:
        return iter(self._voiced)

    def __len__(self) -> int:
        return len(self._voiced)
