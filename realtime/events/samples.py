"""One well-formed example of every GA server event, as the service sends them.

For tests and the local server: each example validates against the official SDK's
server event types with no undeclared keys. ``server_event_sample(type)`` returns a
fresh copy that callers may change.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["SERVER_EVENT_SAMPLES", "server_event_sample"]

_R = {"response_id": "resp_1", "output_index": 0}
_P = {**_R, "item_id": "item_a", "content_index": 0}
_USER = {
    "id": "item_u",
    "object": "realtime.item",
    "type": "message",
    "role": "user",
    "status": "completed",
    "content": [{"type": "input_audio", "transcript": "hello"}],
}
_ASSISTANT = {
    "id": "item_a",
    "object": "realtime.item",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_audio", "transcript": "Hi there."}],
}
_CALL = {
    "id": "item_f",
    "object": "realtime.item",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
}
_RESPONSE = {
    "id": "resp_1",
    "object": "realtime.response",
    "status": "completed",
    "status_details": None,
    "output": [_ASSISTANT, _CALL],
    "conversation_id": "conv_1",
    "output_modalities": ["audio"],
    "max_output_tokens": "inf",
    "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}},
    "usage": {"total_tokens": 30, "input_tokens": 10, "output_tokens": 20},
    "metadata": None,
}
_SESSION = {
    "type": "realtime",
    "model": "gpt-realtime-2.1",
    "instructions": "Be brief.",
    "output_modalities": ["audio"],
    "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}},
}

SERVER_EVENT_SAMPLES: dict[str, dict[str, Any]] = {
    "error": {
        "error": {
            "type": "invalid_request_error",
            "code": "response_cancel_not_active",
            "message": "Cancellation failed: no active response found",
            "param": None,
            "event_id": "evt_c_1",
        }
    },
    "session.created": {"session": _SESSION},
    "session.updated": {"session": _SESSION},
    "conversation.created": {"conversation": {"id": "conv_1", "object": "realtime.conversation"}},
    "conversation.item.added": {"item": _USER, "previous_item_id": None},
    "conversation.item.done": {"item": _USER, "previous_item_id": None},
    "conversation.item.created": {"item": _USER, "previous_item_id": "item_0"},
    "conversation.item.retrieved": {"item": _ASSISTANT},
    "conversation.item.truncated": {"item_id": "item_a", "content_index": 0, "audio_end_ms": 1200},
    "conversation.item.deleted": {"item_id": "item_a"},
    "conversation.item.input_audio_transcription.delta": {"item_id": "item_u", "content_index": 0, "delta": "hel"},
    "conversation.item.input_audio_transcription.completed": {
        "item_id": "item_u",
        "content_index": 0,
        "transcript": "hello",
        "usage": {"type": "duration", "seconds": 1.5},
    },
    "conversation.item.input_audio_transcription.failed": {
        "item_id": "item_u",
        "content_index": 0,
        "error": {"type": "transcription_error", "code": "audio_unintelligible", "message": "no speech"},
    },
    "conversation.item.input_audio_transcription.segment": {
        "id": "seg_1",
        "item_id": "item_u",
        "content_index": 0,
        "text": "hello",
        "speaker": "A",
        "start": 0.0,
        "end": 0.6,
    },
    "input_audio_buffer.committed": {"item_id": "item_u", "previous_item_id": None},
    "input_audio_buffer.cleared": {},
    "input_audio_buffer.speech_started": {"audio_start_ms": 1500, "item_id": "item_u"},
    "input_audio_buffer.speech_stopped": {"audio_end_ms": 2400, "item_id": "item_u"},
    "input_audio_buffer.timeout_triggered": {"audio_start_ms": 9000, "audio_end_ms": 15000, "item_id": "item_u"},
    "input_audio_buffer.dtmf_event_received": {"event": "5", "received_at": 1767225600},
    "output_audio_buffer.started": {"response_id": "resp_1"},
    "output_audio_buffer.stopped": {"response_id": "resp_1"},
    "output_audio_buffer.cleared": {"response_id": "resp_1"},
    "rate_limits.updated": {
        "rate_limits": [
            {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 0.06},
            {"name": "tokens", "limit": 50000, "remaining": 49000, "reset_seconds": 1.2},
        ]
    },
    "response.created": {
        "response": {"id": "resp_1", "object": "realtime.response", "status": "in_progress", "output": []}
    },
    "response.done": {"response": _RESPONSE},
    "response.output_item.added": {**_R, "item": {**_CALL, "arguments": "", "status": "in_progress"}},
    "response.output_item.done": {**_R, "item": _CALL},
    "response.content_part.added": {**_P, "part": {"type": "audio", "transcript": ""}},
    "response.content_part.done": {**_P, "part": {"type": "audio", "transcript": "Hi there."}},
    "response.output_audio.delta": {**_P, "delta": "AAABAAIA"},
    "response.output_audio.done": {**_P},
    "response.output_audio_transcript.delta": {**_P, "delta": "Hi "},
    "response.output_audio_transcript.done": {**_P, "transcript": "Hi there."},
    "response.output_text.delta": {**_P, "delta": "Hi "},
    "response.output_text.done": {**_P, "text": "Hi there."},
    "response.function_call_arguments.delta": {**_R, "item_id": "item_f", "call_id": "call_1", "delta": '{"ci'},
    "response.function_call_arguments.done": {
        **_R,
        "item_id": "item_f",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    },
    "mcp_list_tools.in_progress": {"item_id": "item_m"},
    "mcp_list_tools.completed": {"item_id": "item_m"},
    "mcp_list_tools.failed": {"item_id": "item_m"},
    "response.mcp_call_arguments.delta": {**_R, "item_id": "item_m", "delta": '{"q'},
    "response.mcp_call_arguments.done": {**_R, "item_id": "item_m", "arguments": '{"q":1}'},
    "response.mcp_call.in_progress": {"item_id": "item_m", "output_index": 0},
    "response.mcp_call.completed": {"item_id": "item_m", "output_index": 0},
    "response.mcp_call.failed": {"item_id": "item_m", "output_index": 0},
}
"""Per GA type, the event's fields other than ``type`` and ``event_id``."""


def server_event_sample(event_type: str, event_id: str = "event_1") -> dict[str, Any]:
    """A complete, SDK-valid example of ``event_type`` as a fresh dict (``type`` first)."""
    body = copy.deepcopy(SERVER_EVENT_SAMPLES[event_type])
    if event_type == "input_audio_buffer.dtmf_event_received":  # the SDK gives it no event_id
        return {"type": event_type, **body}
    return {"type": event_type, "event_id": event_id, **body}
