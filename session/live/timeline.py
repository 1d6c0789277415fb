"""Assistant audio on the GPT-Live session timeline: utterances, where they lie, and what of them was heard.

Plain arithmetic, no I/O (docs/protocol.md §14).

The Live interface has no items: the model talks until it decides to stop. Its output is one
continuous track, silence included, played in delivery order; on the primary WebSocket the
deltas carry no times, because the track *is* the session timeline: received sample ``k`` lies
at ``k / rate`` after the session's start (a sideband's reflected deltas, which carry ``start_ms``,
are not placed here: a sideband has no listener). Words arrive as ``session.output_transcript.delta`` with ``start_ms`` /
``end_ms`` on the same timeline. :class:`LiveTimeline` turns that into *utterances* the playout
can tag and a cut can name:

* an utterance opens with the first audible frame (peak above ``SILENT``) and ends after
  ``gap_ms`` of silent track; the silence between utterances is not queued for playout;
* it knows the track position of its first sample, so its heard sample ``h`` lies at
  ``(origin + h) / rate`` on the timeline;
* its words are the transcript deltas that start inside it (they may arrive before or after
  its audio).

:meth:`LiveTimeline.heard` answers, for a count of heard samples, the timeline instant the
listener reached and the words before it: whole deltas that ended by then, and of the delta
under way the whole words its elapsed share of time covers.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_TEXTS", "Heard", "LiveTimeline", "Utterance"]

SILENT = 64  # a frame whose peak stays below this (about −54 dBFS) is silence
GAP_MS = 500  # this much silent track ends an utterance
MAX_TEXTS = 8_192  # transcript pieces kept (the utterances kept hold a few hundred: one per word or so)


@dataclass(slots=True)
class Utterance:
    """One stretch of assistant speech; its audio is tagged ``(uid, 0)`` in the playout."""

    uid: str
    index: int
    origin: int  # track position (samples) of its first sample
    first_rx: float  # listener time its first audio arrived
    received: int = 0  # samples of it received (queued or dropped), trailing silence included
    voiced_end: int = 0  # samples of it up to the end of its last audible frame
    cut: bool = False  # the listener stopped hearing it: the rest of it is dropped
    closed: bool = False

    def start_ms(self, rate: int) -> float:
        return self.origin * 1000 / rate


@dataclass(frozen=True, slots=True)
class Heard:
    """What the listener got of one utterance."""

    uid: str
    heard_samples: int
    heard_ms: float
    at_ms: float  # the timeline instant the listener reached
    text: str  # the words heard
    rest: str  # the words received but not heard
    full_text: str


class LiveTimeline:
    """The session's output track and its utterances, newest last (see the module docstring)."""

    def __init__(self, rate: int = 24_000, *, gap_ms: int = GAP_MS, prefix: str = "live_utt") -> None:
        self.rate = rate
        self.gap = rate * gap_ms // 1000
        self._prefix = prefix
        self.position = 0  # samples of track received
        self.utterances: dict[str, Utterance] = {}
        self.current: Utterance | None = None
        self._silent_run = 0
        self._texts: list[tuple[int, int, str, int]] = []  # (start_ms, end_ms, text, arrival order), by start
        self._count = 0
        self._order = 0

    def audio(self, pcm: np.ndarray, now: float) -> tuple[Utterance | None, bool]:
        """A delta of track: the utterance it belongs to (None: silence between utterances) and whether it opened
        one. Its place is the count of samples before it: the track is the timeline (a time a delta claims is not
        taken: one far ahead would stretch an utterance past any end, and keep it forever)."""
        at, n = self.position, len(pcm)
        self.position += n
        loud = n > 0 and int(np.abs(pcm.astype(np.int32)).max()) >= SILENT
        cur = self.current
        if cur is None:
            if not loud:
                return None, False
            self._count += 1
            cur = Utterance(f"{self._prefix}{self._count:05d}", self._count, at, now)
            self.utterances[cur.uid] = cur
            self.current = cur
            self._silent_run = 0
            cur.received = cur.voiced_end = n
            return cur, True
        cur.received = at + n - cur.origin
        if loud:
            self._silent_run = 0
            cur.voiced_end = cur.received
        else:
            self._silent_run += n
            if self._silent_run >= self.gap:
                cur.closed = True
                self.current = None
        return cur, False

    def end(self) -> None:
        """The track is over (its session closed, or its connection was lost): the utterance under way is whole."""
        if self.current is not None:
            self.current.closed = True
            self.current = None

    def transcript(self, start_ms: int, end_ms: int, text: str) -> Utterance | None:
        """An output transcript delta; the utterance it lies in, if its audio has come. At most :data:`MAX_TEXTS`
        pieces are kept (the earliest placed go first): words whose audio never comes are not kept for ever."""
        self._order += 1
        insort(self._texts, (start_ms, end_ms, text, self._order))
        if len(self._texts) > MAX_TEXTS:
            del self._texts[0]
        return self.utterance_at(start_ms)

    def utterance_at(self, ms: float) -> Utterance | None:
        pos = ms * self.rate / 1000
        for utt in reversed(self.utterances.values()):
            end = utt.origin + (utt.received if utt.closed or utt is not self.current else max(utt.received, 1 << 62))
            if utt.origin - self.rate // 50 <= pos < end:  # a word may be placed a frame before the audio
                return utt
            if pos >= end:
                return None
        return None

    def text_of(self, utt: Utterance) -> list[tuple[int, int, str]]:
        end_ms = (utt.origin + utt.received) * 1000 / self.rate if utt.closed else float("inf")
        lo = utt.start_ms(self.rate) - 20
        return [(s, e, t) for s, e, t, _ in self._texts if lo <= s < end_ms]

    def heard(self, uid: str, heard_samples: int) -> Heard:
        """The listener heard ``heard_samples`` of utterance ``uid`` (from its start)."""
        utt = self.utterances[uid]
        at = (utt.origin + heard_samples) * 1000 / self.rate
        heard_parts: list[str] = []
        rest_parts: list[str] = []
        for start, end, piece in self.text_of(utt):
            if end <= at:
                heard_parts.append(piece)
            elif start >= at:
                rest_parts.append(piece)
            else:
                part = _words_by_share(piece, (at - start) / (end - start))
                heard_parts.append(part)
                rest_parts.append(piece[len(part):])
        full = "".join(heard_parts) + "".join(rest_parts)
        return Heard(uid, heard_samples, heard_samples * 1000 / self.rate, at, "".join(heard_parts),
                     "".join(rest_parts), full)

    def forget_before(self, ms: float) -> None:
        """Drop transcript and utterances wholly before ``ms`` (bounded memory over a long session)."""
        self._texts = [t for t in self._texts if t[1] >= ms]
        for uid in [u.uid for u in self.utterances.values()
                    if u.closed and (u.origin + u.received) * 1000 / self.rate < ms]:
            del self.utterances[uid]

    def forget(self, uid: str) -> None:
        """Drop a closed utterance and the words placed in it (the session is done with it)."""
        utt = self.utterances.pop(uid, None)
        if utt is None:
            return
        lo = utt.start_ms(self.rate) - 20
        hi = (utt.origin + utt.received) * 1000 / self.rate
        self._texts = [t for t in self._texts if not lo <= t[0] < hi]

    def forget_texts_before(self, ms: float) -> None:
        """Drop words that ended before ``ms`` (those of no utterance still kept)."""
        if self._texts and self._texts[0][0] < ms:
            self._texts = [t for t in self._texts if t[1] >= ms]

    def sizes(self) -> dict[str, int]:
        return {"live_utterances": len(self.utterances), "live_texts": len(self._texts)}


def _words_by_share(text: str, share: float) -> str:
    """The leading whole words of ``text`` that a ``share`` (0–1) of its time covers."""
    if share >= 1.0:
        return text
    if share <= 0.0:
        return ""
    cut = int(len(text) * share)
    head = text[:cut]
    if cut < len(text) and not text[cut].isspace():  # a word under way is not heard whole
        space = head.rfind(" ")
        head = head[:space] if space >= 0 else ""
    return head
