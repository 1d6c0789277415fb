"""The stand-in's output track: a continuous 24 kHz signal, silent unless it is speaking.

Positions are samples at 24 kHz on the session timeline (sample ``n`` is ``n / 24`` ms after
the session started). The track is rendered frame by frame, in order, and never revised:
a frame once rendered has been sent. An :class:`Utterance` is placed at a start position;
:meth:`Utterance.cut` stops it at a position not yet rendered (a fade of 5 ms, then silence).

Transcript words are placed on the utterance's audio by their share of its characters (the
stand-in has no aligner); a word is reported once its audio has all been rendered, or, when
the utterance is cut inside it, with its end at the cut. A word whose audio never started is
never reported: the transcript says what the track carried, no more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from voxline.realtime.server.live.audio import MODEL_RATE, Pcm

__all__ = ["Utterance", "Word", "ms", "place_words"]

_FADE = MODEL_RATE * 5 // 1000


def ms(position: int) -> int:
    """Milliseconds on the timeline of a 24 kHz sample position."""
    return position * 1000 // MODEL_RATE


@dataclass(frozen=True, slots=True)
class Word:
    """A piece of the transcript (a word with the space before it) and where its audio lies."""

    text: str
    start: int
    end: int


def place_words(text: str, start: int, length: int) -> list[Word]:
    """``text``'s words placed on ``length`` samples from ``start``, by share of characters."""
    pieces = re.findall(r"\s*\S+", text)
    total = sum(len(p) for p in pieces) or 1
    words: list[Word] = []
    offset = 0
    for piece in pieces:
        lo = start + length * offset // total
        offset += len(piece)
        words.append(Word(piece, lo, start + length * offset // total))
    return words


@dataclass
class Utterance:
    """One thing the stand-in says: its samples from ``start``, its words, and where it was cut."""

    text: str
    samples: Pcm
    start: int
    words: list[Word] = field(default_factory=list)
    cut_at: int | None = None
    _reported: int = 0  # words already sent as transcript deltas

    def __post_init__(self) -> None:
        if not self.words:
            self.words = place_words(self.text, self.start, int(self.samples.size))

    @property
    def end(self) -> int:
        """Where its audio ends: the cut, or its natural end."""
        natural = self.start + int(self.samples.size)
        return natural if self.cut_at is None else min(natural, self.cut_at + _FADE)

    def cut(self, at: int) -> None:
        """Stop speaking at ``at`` (clamped into the utterance); a later cut changes nothing."""
        if self.cut_at is None:
            self.cut_at = max(self.start, min(at, self.start + int(self.samples.size)))

    def render_into(self, frame: Pcm, frame_start: int) -> None:
        """Add this utterance's part of ``[frame_start, frame_start + len(frame))`` into ``frame``."""
        lo = max(frame_start, self.start)
        hi = min(frame_start + frame.size, self.end)
        if hi <= lo:
            return
        part = self.samples[lo - self.start : hi - self.start].astype(np.float32)
        if self.cut_at is not None and hi > self.cut_at:
            # a linear fade over the 5 ms after the cut, so the stop does not click
            positions = np.arange(lo, hi)
            gain = np.clip(1.0 - (positions - self.cut_at) / _FADE, 0.0, 1.0)
            part *= np.where(positions >= self.cut_at, gain, 1.0)
        frame[lo - frame_start : hi - frame_start] = part.astype(np.int16)

    def words_done_by(self, position: int) -> list[Word]:
        """Words not reported yet whose audio is all rendered by ``position`` (cut words end at the cut)."""
        done: list[Word] = []
        while self._reported < len(self.words):
            word = self.words[self._reported]
            if self.cut_at is not None and word.start >= self.cut_at:
                self._reported = len(self.words)  # never spoken
                break
            end = word.end if self.cut_at is None else min(word.end, self.cut_at)
            if end > position:
                break
            done.append(Word(word.text, word.start, end))
            self._reported += 1
        return done

    def finished_by(self, position: int) -> bool:
        return position >= self.end and self._reported >= len(self.words)
