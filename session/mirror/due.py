"""What the bulk of a reply adds to the mirror, held until something reads or changes an item.

A reply streams as many audio deltas and one transcript delta per word or so. Writing each
into a new frozen record would copy the record (and its growing text and marks) per delta;
:class:`DueDeltas` keeps them aside instead: per item the audio ms received, and for a
transcript that streams into an item's only text part, the words and their marks. The
mirror folds them in (:meth:`DueDeltas.settle`, one replace per item) before any other
event or read, so what an application sees is exactly what per-delta records would say.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .order import ItemOrder
from .heard import TextMark
from .records import MirrorItem

__all__ = ["DueDeltas"]


@dataclass(slots=True)
class _Transcript:
    """Transcript deltas of one item's part ``index``, with the item's state as they came."""

    index: int
    received_ms: float  # audio_ms_received as the record would say after the last delta
    text_len: int  # len(item.text) after the last delta
    words: list[str] = field(default_factory=list)
    marks: list[TextMark] = field(default_factory=list)


class DueDeltas:
    """Audio counts and transcript words of live items that are not in their records yet."""

    def __init__(self) -> None:
        self._audio: dict[str, float] = {}  # ms of audio per item since its last fold
        self._transcripts: dict[str, _Transcript] = {}

    def __bool__(self) -> bool:
        return bool(self._audio or self._transcripts)

    def add_audio(self, item_id: str, ms: float) -> None:
        self._audio[item_id] = self._audio.get(item_id, 0.0) + ms

    def add_transcript(self, item: MirrorItem, index: int, delta: str) -> bool:
        """Hold a transcript delta for ``item`` (live, uncut); False if it needs the full path.

        Held only where the record's own update is plain: part ``index`` exists with its
        type, no other part has text (so the item's text is that part's), and the item
        already knows its response.
        """
        pending = self._transcripts.get(item.id)
        if pending is None:
            parts = item.parts
            if (item.frozen or item.response_id is None or not 0 <= index < len(parts) or not parts[index].type
                    or any(p.text for i, p in enumerate(parts) if i != index)):
                return False
            pending = self._transcripts[item.id] = _Transcript(index, item.audio_ms_received, len(parts[index].text))
        elif pending.index != index:
            return False
        # the record's update per delta: audio folded in, a mark at the text so far, then the text
        pending.received_ms += self._audio.pop(item.id, 0.0)
        pending.marks.append((pending.text_len, pending.received_ms))
        pending.words.append(delta)
        pending.text_len += len(delta)
        return True

    def settle(self, order: ItemOrder) -> None:
        """Fold everything held into the records (one replace per item)."""
        audio, self._audio = self._audio, {}
        transcripts, self._transcripts = self._transcripts, {}
        for item_id, pending in transcripts.items():
            item = order.get(item_id)
            if item is None or item.frozen:
                continue
            parts = list(item.parts)
            part = parts[pending.index]
            parts[pending.index] = dataclasses.replace(part, text=part.text + "".join(pending.words))
            order.replace(dataclasses.replace(
                item, parts=tuple(parts), text_marks=(*item.text_marks, *pending.marks),
                audio_ms_received=pending.received_ms + audio.pop(item_id, 0.0)))
        for item_id, ms in audio.items():
            item = order.get(item_id)
            if item is not None and not item.frozen:
                order.replace(dataclasses.replace(item, audio_ms_received=item.audio_ms_received + ms))
