"""Records of the conversation mirror: one frozen :class:`MirrorItem` per conversation item.

A record is replaced, never changed, when a server event updates its item, so a snapshot
handed to an application stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .heard import HeardEstimate, TextMark, estimate_heard

__all__ = ["AUDIO_PART_TYPES", "ItemKind", "MirrorItem", "MirrorPart"]

ItemKind = Literal["message", "function_call", "function_call_output", "other"]

AUDIO_PART_TYPES = frozenset({"input_audio", "output_audio", "audio"})
"""Content part types that carry audio (``audio`` is the beta spelling the SDK still types)."""


@dataclass(frozen=True, slots=True)
class MirrorPart:
    """One content part of a message: its type and its text (text, transcript or transcription).

    ``image_url``/``detail`` are kept for ``input_image`` parts when the server echoes them.
    """

    type: str | None = None
    text: str = ""
    image_url: str | None = None
    detail: str | None = None

    @property
    def is_audio(self) -> bool:
        return self.type in AUDIO_PART_TYPES


@dataclass(frozen=True, slots=True)
class MirrorItem:
    """The client's copy of one conversation item.

    ``text`` is the message's text so far: typed text, the assistant's transcript (deltas
    accumulate, ``.done`` replaces) or the user's transcription once it arrives.
    ``audio_ms_received`` counts assistant audio received (or reported by a barge-in).
    ``truncated``/``cut_ms`` follow ``conversation.item.truncated`` (``audio_end_ms``); the
    service then drops its own transcript of the item (docs/protocol.md §8) but the mirror keeps
    the text it received. ``heard_ms`` is what the listener heard, from a barge-in.
    ``arguments_done`` is set by ``response.function_call_arguments.done``. ``confirmed`` is
    False for an item this client created whose echo from the server has not arrived yet.
    ``text_marks`` places each transcript delta of an audio item on its audio: ``(character
    offset, audio ms received when the delta came)``, for the heard-text estimate.
    """

    id: str
    kind: ItemKind
    item_type: str
    role: str | None = None
    status: str | None = None
    parts: tuple[MirrorPart, ...] = ()
    audio_ms_received: float = 0.0
    truncated: bool = False
    cut_ms: int | None = None
    heard_ms: float | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    arguments_done: bool = False
    output: str | None = None
    response_id: str | None = None
    deleted: bool = False
    confirmed: bool = True
    text_marks: tuple[TextMark, ...] = ()

    @property
    def text(self) -> str:
        """The text of every part that has some, joined by newlines."""
        return "\n".join(part.text for part in self.parts if part.text)

    @property
    def has_audio(self) -> bool:
        return any(part.is_audio for part in self.parts)

    @property
    def frozen(self) -> bool:
        """True once the item was cut: later text and audio for it are not counted."""
        return self.truncated or self.heard_ms is not None

    @property
    def listened_ms(self) -> float | None:
        """Milliseconds of this item's audio the listener heard, when a cut says so.

        The smaller of the barge-in's heard time and the server's ``audio_end_ms``;
        ``None`` when the item was never cut (it played, or is playing, in full).
        """
        known = [ms for ms in (self.heard_ms, self.cut_ms if self.truncated else None) if ms is not None]
        return float(min(known)) if known else None

    @property
    def heard(self) -> HeardEstimate:
        """The text the listener heard, and how it was estimated (:mod:`.heard`).

        Text-only items and items never cut: all of ``text`` (method ``"all"``). A cut
        audio item: the text whose transcript deltas arrived within the heard audio
        (``"arrival"``), or, when the text came all at once, the share of it proportional
        to ``listened_ms / audio_ms_received`` at the nearest word end (``"duration"``).
        An estimate either way: transcripts carry no word timings.
        """
        heard = self.listened_ms
        if heard is None or not self.has_audio:
            return HeardEstimate(self.text, "all")
        return estimate_heard(self.text, self.text_marks, heard, self.audio_ms_received)

    @property
    def heard_text(self) -> str:
        """:attr:`heard` as plain text: an *estimate* for a cut audio item."""
        return self.heard.text
