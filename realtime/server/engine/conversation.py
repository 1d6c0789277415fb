"""The server-side conversation: ordered items, their audio, and the truncation rules.

``conversation.item.truncate`` (docs/protocol.md §8) applies only to an assistant
message's ``output_audio`` part that has audio; it keeps the audio up to
``audio_end_ms``, refuses a cut past the audio generated so far, and drops the
item's transcript whole.

Truncation and token counts need only how much audio a part has; only a retrieve returns its
bytes. A conversation that does not keep audio (``keep_audio=False``, the in-process engine
of a replay, which no client retrieves from) holds the lengths alone, so its memory does not
grow with the length of the call. One that keeps it keeps the newest :data:`KEPT_AUDIO_BYTES`
(about 23 minutes of 24 kHz speech, :class:`AudioBudget`): past that the items that began to
hold audio first let go of theirs, as the audio comes, and a retrieve returns them without audio (a session of a week would
otherwise hold gigabytes).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from voxline.base.audio_format import PCM16_24K, AudioFormat
from voxline.base.ordered import last_index
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import RequestRejected

__all__ = ["KEPT_AUDIO_BYTES", "AudioBudget", "Conversation", "Entry"]

KEPT_AUDIO_BYTES = 64 * 1024 * 1024
"""Audio a conversation keeps for retrieves, its newest items'."""


class AudioBudget:
    """The audio a conversation's entries hold for retrieves, within ``limit`` bytes: past it the entries that began
    holding audio first let go of it, never the one whose audio went past it (the newest)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._holders: dict[int, Entry] = {}  # id() → entry, in the order they began to hold audio

    def enroll(self, entry: Entry) -> None:
        """``entry`` holds its audio under this budget from now on (what it holds already counts at once)."""
        if entry.budget is not None:
            raise ValueError("an entry is in one conversation's budget at most")
        entry.budget = self
        if entry.audio:
            self.grew(entry, _bytes_of(entry.audio))

    def grew(self, entry: Entry, size: int) -> None:
        """``entry`` holds ``size`` more bytes (fewer, if negative); past the limit the oldest others let go."""
        self._holders.setdefault(id(entry), entry)
        self.held += size
        while self.held > self.limit:
            oldest = next((other for other in self._holders.values() if other is not entry), None)
            if oldest is None:
                return
            del self._holders[id(oldest)]
            self.held -= oldest._drop_audio()

    def left(self, entry: Entry, size: int) -> None:
        """``entry`` let go of the ``size`` bytes it held (or was deleted)."""
        if self._holders.pop(id(entry), None) is not None:
            self.held -= size


def _bytes_of(audio: dict[int, list[bytes]]) -> int:
    return sum(len(chunk) for chunks in audio.values() for chunk in chunks)


@dataclass
class Entry:
    """One item: its public form, the raw audio of its parts (while kept), and the format of that audio.

    A part's audio is kept as the chunks it arrived in, joined only when retrieved: a reply
    streams in hundreds of chunks, and growing one buffer per part copied it over and over.
    """

    item: dict[str, Any]
    audio: dict[int, list[bytes]] = field(default_factory=dict)
    fmt: AudioFormat = PCM16_24K
    #: bytes of audio each part holds, kept or not
    sizes: dict[int, int] = field(init=False)
    keep_audio: bool = field(default=True, init=False)
    budget: AudioBudget | None = field(default=None, init=False)  # its conversation's, once in one that keeps audio

    def __post_init__(self) -> None:
        self.sizes = {index: sum(map(len, chunks)) for index, chunks in self.audio.items()}

    def add_audio(self, content_index: int, chunk: bytes) -> None:
        self.sizes[content_index] = self.sizes.get(content_index, 0) + len(chunk)
        if self.keep_audio:
            self.audio.setdefault(content_index, []).append(chunk)
            if self.budget is not None:
                self.budget.grew(self, len(chunk))

    def let_go_of_audio(self) -> None:
        """Keep only how much audio each part holds from now on."""
        budget = self.budget
        held = self._drop_audio()
        if budget is not None:
            budget.left(self, held)

    def _drop_audio(self) -> int:
        """Let go of the audio, out of any budget, and say how many bytes it was (for :class:`AudioBudget`, which
        counts them itself: :meth:`let_go_of_audio` is the way for anyone else)."""
        self.keep_audio, self.budget = False, None
        held, self.audio = _bytes_of(self.audio), {}
        return held

    def audio_ms(self, content_index: int) -> float:
        return self.fmt.bytes_to_ms(self.sizes.get(content_index, 0))

    def kept_audio(self, content_index: int) -> bytes:
        """The part's audio as one byte string (empty where none is kept)."""
        return b"".join(self.audio.get(content_index, ()))

    def cut_audio(self, content_index: int, keep: int) -> None:
        """Keep the part's first ``keep`` bytes."""
        self.sizes[content_index] = keep
        chunks = self.audio.get(content_index)
        if chunks is None:
            return
        before = sum(map(len, chunks))
        kept = 0
        for n, chunk in enumerate(chunks):
            if kept + len(chunk) >= keep:
                chunks[n:] = [chunk[: keep - kept]] if keep > kept else []
                break
            kept += len(chunk)
        if self.budget is not None:
            self.budget.grew(self, sum(map(len, chunks)) - before)

    def public(self, with_audio: bool = False) -> dict[str, Any]:
        """The item as events carry it; ``with_audio`` adds base64 audio (``.retrieved``)."""
        out = copy.deepcopy(self.item)
        if with_audio and "content" in out:
            for index in self.audio:
                out["content"][index]["audio"] = base64.b64encode(self.kept_audio(index)).decode("ascii")
        return out


class Conversation:
    """Items in order; ``previous_item_id`` placement, delete, retrieve, truncate."""

    def __init__(self, keep_audio: bool = True, kept_audio_bytes: int = KEPT_AUDIO_BYTES) -> None:
        self.keep_audio = keep_audio
        self.audio_budget = AudioBudget(kept_audio_bytes)
        self._order: list[str] = []
        self._entries: dict[str, Entry] = {}

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return (self._entries[i] for i in self._order)

    def __len__(self) -> int:
        return len(self._order)

    @property
    def last_id(self) -> str | None:
        return self._order[-1] if self._order else None

    def get(self, item_id: str) -> Entry | None:
        return self._entries.get(item_id)

    def _at(self, item_id: str) -> int:
        """The place of an item present, looked for among the newest first: a rebuild's creates and a cut's deletes
        are about the newest items (voxline.base.ordered)."""
        at = last_index(self._order, item_id)
        if at is None:  # never: every entry has its place
            raise KeyError(item_id)
        return at

    def insert(self, entry: Entry, previous_item_id: str | None = None) -> str | None:
        """Add ``entry`` after ``previous_item_id`` (``"root"`` = first, ``None`` = last).

        Returns the id of the item now before it, or ``None`` at the start.
        """
        item_id = entry.item["id"]
        if item_id in self._entries:
            message = f"Error adding item: an item with id '{item_id}' already exists."
            raise RequestRejected(errors.invalid_value("item.id", message))
        if entry.budget is not None:
            raise ValueError("an entry is in one conversation at most")
        if previous_item_id is None:
            index = len(self._order)
        elif previous_item_id == "root":
            index = 0
        elif previous_item_id in self._entries:
            index = self._at(previous_item_id) + 1
        else:
            message = f"Error adding item: the previous item with id '{previous_item_id}' does not exist."
            raise RequestRejected(errors.invalid_value("previous_item_id", message))
        self._order.insert(index, item_id)
        self._entries[item_id] = entry
        if not self.keep_audio:
            entry.let_go_of_audio()
        else:
            self.audio_budget.enroll(entry)
        return self._order[index - 1] if index > 0 else None

    def previous_id(self, item_id: str) -> str | None:
        """The id of the item now before ``item_id``; ``None`` when it is first (or not there)."""
        if item_id not in self._entries:
            return None
        index = self._at(item_id)
        return self._order[index - 1] if index > 0 else None

    def delete(self, item_id: str) -> None:
        if item_id not in self._entries:
            raise RequestRejected(errors.item_not_found("deleting", item_id))
        del self._order[self._at(item_id)]
        self._entries.pop(item_id).let_go_of_audio()  # out of the audio budget too

    def retrieve(self, item_id: str) -> dict[str, Any]:
        entry = self._entries.get(item_id)
        if entry is None:
            raise RequestRejected(errors.item_not_found("retrieving", item_id))
        return entry.public(with_audio=True)

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> None:
        """Cut assistant audio at ``audio_end_ms`` and drop the transcript, or raise."""
        entry = self._entries.get(item_id)
        if entry is None:
            raise RequestRejected(errors.truncate_unknown_item(item_id))
        item = entry.item
        content = item.get("content") or []
        is_audio = (
            item.get("role") == "assistant"
            and 0 <= content_index < len(content)
            and content[content_index].get("type") == "output_audio"
        )
        if not is_audio or not entry.sizes.get(content_index):
            raise RequestRejected(errors.truncate_unsupported())
        have_ms = int(entry.audio_ms(content_index))
        if audio_end_ms > have_ms:
            raise RequestRejected(errors.truncate_too_long(have_ms, audio_end_ms))
        if audio_end_ms < 0:
            raise RequestRejected(errors.below_min("audio_end_ms", 0, audio_end_ms))
        keep = int(audio_end_ms * entry.fmt.bytes_per_ms)
        keep -= keep % entry.fmt.bytes_per_sample
        entry.cut_audio(content_index, keep)
        content[content_index]["transcript"] = None
