"""Assistant audio on the GPT-Live session timeline: utterances, their anchors and what of them was heard.

Plain arithmetic, no I/O (docs/protocol.md §GPT-Live, docs/design.md §Live timeline).

The Live interface has no items: the model talks until it decides to stop, its audio on the
primary WebSocket carries no times, and its words arrive as ``session.output_transcript.delta``
with ``start_ms`` / ``end_ms`` on the session's timeline. :class:`LiveTimeline` turns that into
*utterances* the playout can tag and a cut can name:

* an utterance opens with the first audio after a pause of ``gap_s`` in the audio's arrival
  (or, on a sideband's reflection, in its own ``start_ms``), and every later sample belongs to
  it until the next pause;
* it is placed on the timeline by anchors ``(sample offset, timeline ms)``: the reflection's own
  ``start_ms`` where the audio carries it, else the ``start_ms`` of its first transcript delta
  (the words begin where its audio does), so sample ``k`` is at ``anchor_ms + (k − offset) / rate``;
* transcript deltas belong to the utterance open when they arrive (one arriving in a pause waits
  for the next utterance).

:meth:`LiveTimeline.heard` answers, for a count of heard samples, the timeline instant the
listener reached and the words before it: whole deltas that ended by then, and of the delta
under way the words its elapsed share of time covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Heard", "LiveTimeline", "Utterance"]

GAP_S = 0.5  # a pause this long in the audio's arrival begins a new utterance


@dataclass(slots=True)
class Utterance:
    """One stretch of assistant speech; its audio is tagged ``(uid, 0)`` in the playout."""

    uid: str
    index: int
    first_rx: float
    last_rx: float
    received: int = 0  # samples received (played or dropped)
    anchors: list[tuple[int, float]] = field(default_factory=list)
    texts: list[tuple[int, int, str]] = field(default_factory=list)  # (start_ms, end_ms, text)
    cut: bool = False  # the listener stopped hearing it: its later audio is dropped

    @property
    def text(self) -> str:
        return "".join(t for _, _, t in self.texts)

    def timeline_ms(self, sample: int, rate: int) -> float | None:
        """Where sample ``sample`` of this utterance sits on the session timeline; None while unanchored."""
        anchor = None
        for offset, ms in self.anchors:
            if offset <= sample:
                anchor = (offset, ms)
        if anchor is None:
            if not self.anchors:
                return None
            anchor = self.anchors[0]
        return anchor[1] + (sample - anchor[0]) * 1000 / rate


@dataclass(frozen=True, slots=True)
class Heard:
    """What the listener got of one utterance."""

    uid: str
    heard_samples: int
    heard_ms: float
    at_ms: float | None  # the timeline instant the listener reached (None: never anchored)
    text: str  # the words heard
    rest: str  # the words not heard
    full_text: str


class LiveTimeline:
    """The session's utterances, newest last (see the module docstring)."""

    def __init__(self, rate: int = 24_000, *, gap_s: float = GAP_S, prefix: str = "live_utt") -> None:
        self.rate = rate
        self.gap_s = gap_s
        self._prefix = prefix
        self.utterances: dict[str, Utterance] = {}
        self.current: Utterance | None = None
        self._pending: list[tuple[int, int, str]] = []  # transcript that arrived in a pause
        self._count = 0

    def audio(self, samples: int, now: float, start_ms: int | None = None) -> Utterance:
        """``samples`` of output audio arrived at ``now``: the utterance they belong to."""
        cur = self.current
        if cur is not None and start_ms is not None and cur.anchors:
            expected = cur.timeline_ms(cur.received, self.rate)
            opens = expected is not None and start_ms - expected >= self.gap_s * 1000
        else:
            opens = cur is None or now - cur.last_rx >= self.gap_s
        if opens:
            self._count += 1
            cur = Utterance(f"{self._prefix}{self._count:05d}", self._count, now, now)
            self.utterances[cur.uid] = cur
            self.current = cur
            if self._pending:
                cur.anchors.append((0, float(self._pending[0][0])))
                cur.texts.extend(self._pending)
                self._pending = []
        assert cur is not None
        if start_ms is not None and (not cur.anchors or cur.anchors[-1][0] != cur.received):
            cur.anchors.append((cur.received, float(start_ms)))
        cur.received += samples
        cur.last_rx = now
        return cur

    def transcript(self, start_ms: int, end_ms: int, text: str, now: float) -> Utterance | None:
        """An output transcript delta: into the open utterance (anchoring it if it has no anchor yet)."""
        cur = self.current
        if cur is None or now - cur.last_rx >= self.gap_s:
            self._pending.append((start_ms, end_ms, text))
            return None
        if not cur.anchors:
            cur.anchors.append((0, float(start_ms)))
        cur.texts.append((start_ms, end_ms, text))
        return cur

    def heard(self, uid: str, heard_samples: int) -> Heard:
        """The listener heard ``heard_samples`` of utterance ``uid`` (from its start)."""
        utt = self.utterances[uid]
        at = utt.timeline_ms(heard_samples, self.rate)
        heard_ms = heard_samples * 1000 / self.rate
        if at is None:  # no times at all: the share of the words by the share of the audio
            share = heard_samples / utt.received if utt.received else 0.0
            text = _words_by_share(utt.text, share)
            return Heard(uid, heard_samples, heard_ms, None, text, utt.text[len(text):], utt.text)
        heard_parts: list[str] = []
        rest_parts: list[str] = []
        for start, end, piece in utt.texts:
            if end <= at:
                heard_parts.append(piece)
            elif start >= at:
                rest_parts.append(piece)
            else:
                part = _words_by_share(piece, (at - start) / (end - start))
                heard_parts.append(part)
                rest_parts.append(piece[len(part):])
        return Heard(uid, heard_samples, heard_ms, at, "".join(heard_parts), "".join(rest_parts), utt.text)

    def forget(self, uid: str) -> None:
        self.utterances.pop(uid, None)

    def sizes(self) -> dict[str, int]:
        return {"live_utterances": len(self.utterances), "live_pending_text": len(self._pending)}


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
