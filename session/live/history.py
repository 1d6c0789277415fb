"""The conversation as heard, kept for a new GPT-Live session after a drop (sans-I/O).

Without a stored session to fork, the only continuity a new Live session gets is text-only
history in ``session.start`` (docs/protocol.md §14: at most 128 one-part messages). This
keeps it across every connection of one :class:`~voxline.session.VoiceSession`: the user's
words as the server transcribed them, and of each assistant utterance only what the listener
heard (whole when it played to its end, the heard part when it was cut), in the order they
became known. The oldest messages go first, and each keeps at most its last
:data:`MAX_MESSAGE_CHARS` characters (a stretch of speech transcribed for an hour, or a server
sending endless words, is one bounded message), so memory stays bounded, and so does each
word's cost: words are gathered in pieces, joined only when read or when they grow past twice
the bound.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["MAX_MESSAGES", "MAX_MESSAGE_CHARS", "HeardHistory"]

MAX_MESSAGES = 128
MAX_MESSAGE_CHARS = 4000


class _Message:
    """One message: its role, its key, and its text in pieces (the last :data:`MAX_MESSAGE_CHARS` kept)."""

    __slots__ = ("role", "key", "pieces", "size")

    def __init__(self, role: str, key: str, text: str) -> None:
        self.role, self.key, self.size = role, key, 0
        self.pieces: list[str] = []
        self.add(text)

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.size += len(text)
        if self.size > 2 * MAX_MESSAGE_CHARS:  # joined once per bound's worth of words: linear in all
            kept = "".join(self.pieces)[-MAX_MESSAGE_CHARS - 1:]
            self.pieces, self.size = [kept], len(kept)

    def text(self) -> str:
        text = "".join(self.pieces)
        if len(text) <= MAX_MESSAGE_CHARS:
            return text
        tail = text[-MAX_MESSAGE_CHARS:]
        space = tail.find(" ")
        return "…" + (tail[space + 1:] if 0 <= space < len(tail) // 2 else tail)  # from a whole word


class HeardHistory:
    """User words and heard assistant text, newest last (see the module docstring)."""

    def __init__(self, limit: int = MAX_MESSAGES) -> None:
        self._messages: deque[_Message] = deque(maxlen=limit)

    def user(self, key: str, words: str) -> None:
        """More words of the user's stretch of speech ``key`` (a new message when it is a new stretch)."""
        last = self._messages[-1] if self._messages else None
        if last is not None and last.role == "user" and last.key == key:
            last.add(words)
        else:
            self._messages.append(_Message("user", key, words))

    def assistant(self, key: str, heard: str) -> None:
        """What the listener heard of utterance ``key``; told once (later calls for it change nothing)."""
        if not self.has(key):
            self._messages.append(_Message("assistant", key, heard))

    def has(self, key: str) -> bool:
        return any(m.role == "assistant" and m.key == key for m in self._messages)

    def messages(self) -> list[dict[str, Any]]:
        """The history as ``session.input`` takes it: one text part each, empty ones left out."""
        out: list[dict[str, Any]] = []
        for message in self._messages:
            text = message.text().strip()
            if text:
                kind = "input_text" if message.role == "user" else "output_text"
                out.append({"role": message.role, "content": [{"type": kind, "text": text}]})
        return out

    def __len__(self) -> int:
        return len(self._messages)
