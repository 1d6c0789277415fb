"""The output items of one response and the events that open, fill and close them.

One :class:`MessageOutput` or :class:`CallOutput` per item; each knows its
``response.output_item.*`` / ``conversation.item.*`` / ``response.content_part.*``
events and its deltas (``response.output_audio.delta`` + ``…transcript.delta``,
``response.output_text.delta``, ``response.function_call_arguments.delta``).
Audio chunks are appended to the item's audio as they are sent, so a truncate
is checked against the audio actually generated so far.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from voxline.realtime.server.engine.conversation import Entry
from voxline.realtime.server.engine.ids import IdFactory, event
from voxline.realtime.server.engine.speech import WireAudio
from voxline.realtime.server.engine.wire_json import Base64Text

__all__ = ["CallOutput", "MessageOutput", "OutputItem", "split_words"]


def split_words(text: str) -> list[str]:
    """Word tokens that concatenate back to ``text`` (spaces stay attached)."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


@dataclass
class MessageOutput:
    """An assistant message with an ``output_audio`` (or ``output_text``) part."""

    entry: Entry
    text: str
    audio: bytes | None  # encoded in the output format; None for text modality or until voiced
    index: int
    response_id: str
    in_conversation: bool
    awaiting_voice: bool = False  # an audio reply whose speech the driver has not provided yet
    words: list[str] = field(default_factory=list)
    sent_words: int = 0
    closed: bool = False
    final_status: str = "completed"
    encoded: WireAudio | None = None  # ``audio`` as the server's voice cache holds it, chunks encoded once

    def __post_init__(self) -> None:
        self.words = split_words(self.text)

    @property
    def item_id(self) -> str:
        return str(self.entry.item["id"])

    @property
    def is_audio(self) -> bool:
        return self.audio is not None or self.awaiting_voice

    def voice(self, audio: bytes) -> None:
        """The reply's speech, encoded in the output format, has arrived."""
        self.audio = audio
        self.encoded = None
        self.awaiting_voice = False

    @property
    def sent_text(self) -> str:
        return "".join(self.words[: self.sent_words])

    def _ids(self) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "item_id": self.item_id,
            "output_index": self.index,
            "content_index": 0,
        }

    def open(self, ids: IdFactory, previous_item_id: str | None) -> list[dict[str, Any]]:
        item = self.entry.item
        events = _item_added(ids, self.response_id, self.index, item, self.in_conversation, previous_item_id)
        kind = "audio" if self.is_audio else "text"
        part = {"type": "audio", "transcript": ""} if self.is_audio else {"type": "text", "text": ""}
        item["content"] = [
            {"type": "output_audio", "transcript": ""} if kind == "audio" else {"type": "output_text", "text": ""}
        ]
        events.append(event(ids, "response.content_part.added", **self._ids(), part=part))
        return events

    def audio_chunk(self, ids: IdFactory, start: int, end: int, last: bool) -> list[dict[str, Any]]:
        """Deltas for audio bytes ``[start, end)``; the transcript runs just ahead of the audio."""
        assert self.audio is not None
        events: list[dict[str, Any]] = []
        target = len(self.words) if last else -(-len(self.words) * end // max(1, len(self.audio)))
        delta = "".join(self.words[self.sent_words : target])
        if delta:
            self.sent_words = max(self.sent_words, target)
            events.append(event(ids, "response.output_audio_transcript.delta", **self._ids(), delta=delta))
        chunk = self.audio[start:end]
        self.entry.add_audio(0, chunk)
        encoded = self.encoded
        delta = encoded.b64(start, end) if encoded is not None else Base64Text(base64.b64encode(chunk).decode("ascii"))
        events.append(event(ids, "response.output_audio.delta", **self._ids(), delta=delta))
        return events

    def text_chunk(self, ids: IdFactory, upto: int) -> list[dict[str, Any]]:
        delta = "".join(self.words[self.sent_words : upto])
        self.sent_words = max(self.sent_words, upto)
        return [event(ids, "response.output_text.delta", **self._ids(), delta=delta)] if delta else []

    def close(self, ids: IdFactory, status: str, previous_item_id: str | None,
              finished: bool = True) -> list[dict[str, Any]]:
        """The closing events; an item stopped early (``finished=False``) keeps the transcript sent so far.
        ``previous_item_id``: the item before it in the conversation now."""
        self.closed = True
        if finished:
            self.sent_words = len(self.words)
        item = self.entry.item
        item["status"] = status
        part = item["content"][0]
        events: list[dict[str, Any]] = []
        if self.is_audio:
            transcript = part["transcript"] if part["transcript"] is None else self.sent_text
            part["transcript"] = transcript
            events.append(event(ids, "response.output_audio.done", **self._ids()))
            events.append(
                event(ids, "response.output_audio_transcript.done", **self._ids(), transcript=transcript or "")
            )
            done_part = {"type": "audio", "transcript": transcript or ""}
        else:
            part["text"] = self.sent_text
            events.append(event(ids, "response.output_text.done", **self._ids(), text=part["text"]))
            done_part = {"type": "text", "text": part["text"]}
        events.append(event(ids, "response.content_part.done", **self._ids(), part=done_part))
        events.extend(_item_done(ids, self.entry.item, self.response_id, self.index, self.in_conversation,
                                 previous_item_id))
        return events


@dataclass
class CallOutput:
    """A ``function_call`` item whose arguments stream in several deltas."""

    entry: Entry
    index: int
    response_id: str
    in_conversation: bool
    chunks: list[str]
    sent: int = 0
    closed: bool = False
    final_status: str = "completed"

    @property
    def item_id(self) -> str:
        return str(self.entry.item["id"])

    def _ids(self) -> dict[str, Any]:
        item = self.entry.item
        return {
            "response_id": self.response_id,
            "item_id": self.item_id,
            "output_index": self.index,
            "call_id": item["call_id"],
        }

    def open(self, ids: IdFactory, previous_item_id: str | None) -> list[dict[str, Any]]:
        item = self.entry.item
        events = _item_added(ids, self.response_id, self.index, item, self.in_conversation, previous_item_id)
        return events

    def arguments_chunk(self, ids: IdFactory) -> list[dict[str, Any]]:
        delta = self.chunks[self.sent]
        self.sent += 1
        self.entry.item["arguments"] += delta
        return [event(ids, "response.function_call_arguments.delta", **self._ids(), delta=delta)]

    def close(self, ids: IdFactory, status: str, previous_item_id: str | None,
              finished: bool = True) -> list[dict[str, Any]]:
        self.closed = True
        item = self.entry.item
        item["status"] = status
        done = event(
            ids, "response.function_call_arguments.done", **self._ids(), name=item["name"], arguments=item["arguments"]
        )
        return [done, *_item_done(ids, item, self.response_id, self.index, self.in_conversation, previous_item_id)]


OutputItem = MessageOutput | CallOutput


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    return {k: ([dict(p) for p in v] if k == "content" else v) for k, v in item.items()}


def _item_done(
    ids: IdFactory, item: dict[str, Any], response_id: str, index: int, in_conversation: bool,
    previous_item_id: str | None,
) -> list[dict[str, Any]]:
    """``conversation.item.done`` for the default conversation (with the item before it, as ``.added`` has), and
    ``response.output_item.done``."""
    events = []
    if in_conversation:
        events.append(event(ids, "conversation.item.done", previous_item_id=previous_item_id, item=_copy(item)))
    events.append(
        event(ids, "response.output_item.done", response_id=response_id, output_index=index, item=_copy(item))
    )
    return events


def _item_added(
    ids: IdFactory, response_id: str, index: int, item: dict[str, Any], in_conversation: bool,
    previous_item_id: str | None,
) -> list[dict[str, Any]]:
    """``response.output_item.added``, and ``conversation.item.added`` for the default conversation."""
    events = [event(ids, "response.output_item.added", response_id=response_id, output_index=index, item=_copy(item))]
    if in_conversation:
        events.append(event(ids, "conversation.item.added", previous_item_id=previous_item_id, item=_copy(item)))
    return events
