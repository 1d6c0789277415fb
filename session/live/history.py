"""The conversation as heard, kept for a new GPT-Live session after a drop (sans-I/O).

Without a stored session to fork, the only continuity a new Live session gets is text-only
history in ``session.start`` (docs/protocol.md §14: at most 128 one-part messages). This
keeps it across every connection of one :class:`~voxline.session.VoiceSession`: the user's
words as the server transcribed them, and of each assistant utterance only what the listener
heard (whole when it played to its end, the heard part when it was cut), in the order they
became known. The oldest messages go first, so memory stays bounded.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["MAX_MESSAGES", "HeardHistory"]

MAX_MESSAGES = 128


class HeardHistory:
    """User words and heard assistant text, newest last (see the module docstring)."""

    def __init__(self, limit: int = MAX_MESSAGES) -> None:
        self._messages: deque[list[str]] = deque(maxlen=limit)  # [role, key, text]

    def user(self, key: str, words: str) -> None:
        """More words of the user's stretch of speech ``key`` (a new message when it is a new stretch)."""
        last = self._messages[-1] if self._messages else None
        if last is not None and last[0] == "user" and last[1] == key:
            last[2] += words
        else:
            self._messages.append(["user", key, words])

    def assistant(self, key: str, heard: str) -> None:
        """What the listener heard of utterance ``key``; told once (later calls for it change nothing)."""
        if not self.has(key):
            self._messages.append(["assistant", key, heard])

    def has(self, key: str) -> bool:
        return any(role == "assistant" and k == key for role, k, _ in self._messages)

    def messages(self) -> list[dict[str, Any]]:
        """The history as ``session.input`` takes it: one text part each, empty ones left out."""
        out: list[dict[str, Any]] = []
        for role, _key, text in self._messages:
            text = text.strip()
            if text:
                kind = "input_text" if role == "user" else "output_text"
                out.append({"role": role, "content": [{"type": kind, "text": text}]})
        return out

    def __len__(self) -> int:
        return len(self._messages)
