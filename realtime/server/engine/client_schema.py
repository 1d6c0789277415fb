"""Schemas of the GA client events the local server accepts over WebSocket.

``output_audio_buffer.clear`` is WebRTC/SIP only: over WebSocket it is answered
like any unsupported type (``invalid_value`` on ``type``), as the service does.
Nested ``session`` and ``item`` objects are checked by their own modules.
"""

from __future__ import annotations

from voxline.realtime.server.engine.items import ITEM
from voxline.realtime.server.engine.session_schema import (
    FORMAT,
    MAX_OUTPUT_TOKENS,
    OUTPUT_MODALITIES,
    REASONING,
    TOOL,
    TOOL_CHOICE,
    VOICE,
)
from voxline.realtime.server.engine.validate import Field, Schema

__all__ = ["BETA_ONLY_TYPES", "CLEAR_SCHEMA", "EVENT_SCHEMAS", "RESPONSE_PARAMS", "SUPPORTED_TYPES"]

_HEAD = {"type": Field(("string",), required=True), "event_id": Field(("string",))}
_REQ_STR = Field(("string",), required=True)

_INPUT_ENTRY = Field(
    ("object",),
    variants=(
        "type",
        {
            "item_reference": {"type": Field(("string",)), "id": _REQ_STR},
            **{name: schema for name, schema in ITEM.variants[1].items()},  # type: ignore[index]
        },
    ),
)

RESPONSE_PARAMS: Schema = {
    "audio": Field(
        ("object",),
        fields={"output": Field(("object",), fields={"format": FORMAT, "voice": VOICE})},
    ),
    "conversation": Field(("string",), choices=("auto", "none")),
    "input": Field(("array",), items=_INPUT_ENTRY),
    "instructions": Field(("string",)),
    "max_output_tokens": MAX_OUTPUT_TOKENS,
    "metadata": Field(("object", "null"), values=Field(("string",))),
    "output_modalities": OUTPUT_MODALITIES,
    "parallel_tool_calls": Field(("boolean",)),
    "prompt": Field(("object", "null")),
    "reasoning": REASONING,
    "tool_choice": TOOL_CHOICE,
    "tools": Field(("array",), items=TOOL),
}

EVENT_SCHEMAS: dict[str, Schema] = {
    "session.update": {**_HEAD, "session": Field(("object",), required=True)},
    "input_audio_buffer.append": {**_HEAD, "audio": _REQ_STR},
    "input_audio_buffer.commit": dict(_HEAD),
    "input_audio_buffer.clear": dict(_HEAD),
    "conversation.item.create": {
        **_HEAD,
        "previous_item_id": Field(("string", "null")),
        "item": Field(("object",), required=True),
    },
    "conversation.item.retrieve": {**_HEAD, "item_id": _REQ_STR},
    "conversation.item.delete": {**_HEAD, "item_id": _REQ_STR},
    "conversation.item.truncate": {
        **_HEAD,
        "item_id": _REQ_STR,
        "content_index": Field(("integer",), required=True, minimum=0),
        "audio_end_ms": Field(("integer",), required=True, minimum=0),
    },
    "response.create": {**_HEAD, "response": Field(("object",), fields=RESPONSE_PARAMS)},
    "response.cancel": {**_HEAD, "response_id": Field(("string",))},
}

SUPPORTED_TYPES: tuple[str, ...] = tuple(EVENT_SCHEMAS)

BETA_ONLY_TYPES = frozenset({"transcription_session.update"})
"""Client events of the shut-down beta protocol only: the service answers ``beta_api_shape_disabled`` and closes."""

CLEAR_SCHEMA: Schema = dict(_HEAD)
"""``output_audio_buffer.clear``, where a call takes it (its data channel, its sideband): checked as any event."""
