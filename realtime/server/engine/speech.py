"""Scripted speech as the engine sees it: a voice cache it only reads, never a synthesizer.

The engine voices a reply (``response.output_audio.delta``) from a :class:`VoiceCache`
filled before the session starts, normally with every fixed reply of the scenario
(:meth:`VoiceCache.for_scenario`); its wire form (bytes in a session's output format, and the
base64 of each chunk a response streams) is made once and shared by every session of the
server (:meth:`VoiceCache.wire`). A text the cache does not hold (a reply with
placeholders such as ``{user_text}``, or one cut by ``max_output_tokens``) keeps its
response waiting after ``response.created``: ``Engine.speech_needed()`` lists it until the
driver hands the samples in with ``Engine.provide_speech(text, samples, now)``.
:mod:`voxline.realtime.server.engine.voices` has the drivers' side of this.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import AudioFormat
from voxline.realtime.server.engine import wire_audio
from voxline.realtime.server.engine.scenario import Say, Scenario
from voxline.realtime.server.engine.wire_json import Base64Text

__all__ = ["Samples", "Synth", "VoiceCache", "WireAudio", "fixed_texts"]

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


class WireAudio:
    """A reply in a session's output format, and the base64 of its chunks, each encoded once.

    Every session a server answers with the same reply in the same format streams the same
    chunks: their base64 is made for the first and read by the others.
    """

    __slots__ = ("data", "_b64")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._b64: dict[tuple[int, int], str] = {}

    def b64(self, start: int, end: int) -> str:
        """The base64 of ``data[start:end]``, as ``base64.b64encode`` gives it."""
        key = (start, end)
        text = self._b64.get(key)
        if text is None:
            text = self._b64[key] = Base64Text(base64.b64encode(self.data[start:end]).decode("ascii"))
        return text


class VoiceCache:
    """Texts already voiced: text → int16 samples at 24 kHz mono, read-only once stored."""

    def __init__(self, voiced: Mapping[str, Samples] | None = None) -> None:
        self._voiced: dict[str, Samples] = {}
        self._wire: dict[tuple[str, AudioFormat], WireAudio] = {}
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

    def wire(self, text: str, fmt: AudioFormat) -> WireAudio | None:
        """``text``'s speech in ``fmt``, made once for every session that asks (None if not voiced)."""
        key = (text, fmt)
        found = self._wire.get(key)
        if found is None:
            samples = self._voiced.get(text)
            if samples is None:
                return None
            found = self._wire[key] = WireAudio(wire_audio.from_pcm24k(samples, fmt))
        return found

    def put(self, text: str, samples: npt.ArrayLike) -> None:
        array = np.array(samples, dtype=np.int16)
        array.flags.writeable = False
        self._voiced[text] = array
        for key in [key for key in self._wire if key[0] == text]:
            del self._wire[key]  # voiced anew: its wire form follows

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
