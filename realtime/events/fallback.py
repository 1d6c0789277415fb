"""Server events outside the GA vocabulary: unknown types and names of the retired beta protocol."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["BETA_SERVER_EVENT_TYPES", "BetaServerEvent", "UnknownServerEvent"]

BETA_SERVER_EVENT_TYPES: dict[str, str | None] = {
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
    "transcription_session.updated": "session.updated",
}
"""Beta-only server event types and their GA successors (docs/protocol.md §5)."""


class _RawEvent(BaseModel):
    """A server event kept as the decoded JSON object it arrived as."""

    type: str
    raw: dict[str, Any]

    @property
    def event_id(self) -> str | None:
        value = self.raw.get("event_id")
        return value if isinstance(value, str) else None


class UnknownServerEvent(_RawEvent):
    """A server event type voxline does not know; never an error, never dropped."""


class BetaServerEvent(_RawEvent):
    """A server event named as in the retired beta protocol; ``ga_type`` is its GA successor.

    Seeing one means the peer speaks the beta protocol, which the GA service no longer does.
    """

    ga_type: str | None = None
