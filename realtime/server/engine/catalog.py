"""Every server event type the local server can send (over WebSocket).

Not sent: ``conversation.item.created`` (beta name), ``output_audio_buffer.*``
(WebRTC/SIP only), input transcription deltas/segments/completions (no speech
recognition here), ``input_audio_buffer.dtmf_event_received`` (SIP), MCP events.
"""

from __future__ import annotations

__all__ = ["EMITTED_EVENT_TYPES"]

EMITTED_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "error",
        "session.created",
        "session.updated",
        "conversation.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.deleted",
        "conversation.item.input_audio_transcription.failed",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.timeout_triggered",
        "response.created",
        "response.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "rate_limits.updated",
    }
)
