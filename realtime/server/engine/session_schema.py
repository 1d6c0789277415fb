"""The GA realtime session object as the service accepts it in ``session.update``.

Strict: a beta key such as ``modalities`` is an ``unknown_parameter``. Only
``type: "realtime"`` sessions are modelled; function tools only (no MCP servers).
"""

from __future__ import annotations

from voxline.base.audio_format import PCM16_24K
from voxline.realtime.server.engine.validate import Field, Schema

__all__ = [
    "FORMAT",
    "REASONING",
    "SESSION_SCHEMA",
    "TOOL",
    "TOOL_CHOICE",
    "TRANSCRIPTION_MODELS",
    "TRANSCRIPTION_SESSION_SCHEMA",
    "VOICE",
    "VOICES",
]

VOICES = ("alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar")

# The transcription models the openai package (3.57.0) lists for ``audio.input.transcription``.
TRANSCRIPTION_MODELS = (
    "whisper-1",
    "gpt-transcribe",
    "gpt-live-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-4o-mini-transcribe-2025-12-15",
    "gpt-4o-transcribe",
    "gpt-4o-transcribe-diarize",
    "gpt-realtime-whisper",
)

_STR = Field(("string",))
_STR_OR_NULL = Field(("string", "null"))
_BOOL = Field(("boolean",))
_OPEN = Field(("object",))

FORMAT = Field(
    ("object",),
    variants=(
        "type",
        {
            "audio/pcm": {"type": _STR, "rate": Field(("integer",), minimum=PCM16_24K.rate, maximum=PCM16_24K.rate)},
            "audio/pcmu": {"type": _STR},
            "audio/pcma": {"type": _STR},
        },
    ),
)

_TRANSCRIPTION = Field(
    ("object", "null"),
    fields={
        "model": Field(("string",), choices=TRANSCRIPTION_MODELS),
        "language": _STR_OR_NULL,
        "prompt": _STR_OR_NULL,
        "delay": Field(("string",), choices=("minimal", "low", "medium", "high", "xhigh")),
        "keywords": Field(("array",), items=_STR),
        "languages": Field(("array",), items=_STR),
    },
)

_NOISE = Field(
    ("object", "null"),
    fields={"type": Field(("string",), choices=("near_field", "far_field")), "strength": Field(("number",))},
)

_COMMON_VAD = {"type": _STR, "create_response": _BOOL, "interrupt_response": _BOOL}
_TURN_DETECTION = Field(
    ("object", "null"),
    variants=(
        "type",
        {
            "server_vad": {
                **_COMMON_VAD,
                "threshold": Field(("number",), minimum=0.0, maximum=1.0),
                "prefix_padding_ms": Field(("integer",), minimum=0),
                "silence_duration_ms": Field(("integer",), minimum=0),
                "idle_timeout_ms": Field(("integer", "null"), minimum=0),
            },
            "semantic_vad": {
                **_COMMON_VAD,
                "eagerness": Field(("string",), choices=("low", "medium", "high", "auto")),
            },
        },
    ),
)

# A built-in voice by name (an unknown name is the service's ``invalid_value``), or a custom ``{"id": …}``.
VOICE = Field(("string", "object"), choices=VOICES, fields={"id": Field(("string",), required=True)})

REASONING = Field(
    ("object",), fields={"effort": Field(("string",), choices=("minimal", "low", "medium", "high", "xhigh"))}
)

_AUDIO = Field(
    ("object",),
    fields={
        "input": Field(
            ("object",),
            fields={
                "format": FORMAT,
                "transcription": _TRANSCRIPTION,
                "noise_reduction": _NOISE,
                "turn_detection": _TURN_DETECTION,
            },
        ),
        "output": Field(
            ("object",),
            fields={
                "format": FORMAT,
                "voice": VOICE,
                "speed": Field(("number",), minimum=0.25, maximum=1.5),
            },
        ),
    },
)

TOOL = Field(
    ("object",),
    variants=(
        "type",
        {
            "function": {
                "type": _STR,
                "name": Field(("string",), required=True),
                "description": _STR,
                "parameters": _OPEN,
            }
        },
    ),
)

TOOL_CHOICE = Field(
    ("string", "object"),
    choices=("none", "auto", "required"),
    variants=("type", {"function": {"type": _STR, "name": Field(("string",), required=True)}}),
)

_TRUNCATION = Field(
    ("string", "object"),
    choices=("auto", "disabled"),
    variants=(
        "type",
        {
            "retention_ratio": {
                "type": _STR,
                "retention_ratio": Field(("number",), required=True, minimum=0.0, maximum=1.0),
                "token_limits": Field(("object",), fields={"post_instructions": Field(("integer",), minimum=0)}),
            }
        },
    ),
)

_TRACING = Field(
    ("string", "object", "null"),
    choices=("auto",),
    fields={"group_id": _STR, "metadata": _OPEN, "workflow_name": _STR},
)

MAX_OUTPUT_TOKENS = Field(("integer", "string"), choices=("inf",), minimum=1, maximum=4096)
OUTPUT_MODALITIES = Field(("array",), items=Field(("string",), choices=("text", "audio")))

SESSION_SCHEMA: Schema = {
    "type": Field(("string",), required=True, choices=("realtime", "transcription")),
    "model": _STR,
    "instructions": _STR,
    "output_modalities": OUTPUT_MODALITIES,
    "max_output_tokens": MAX_OUTPUT_TOKENS,
    "audio": _AUDIO,
    "tools": Field(("array",), items=TOOL),
    "tool_choice": TOOL_CHOICE,
    "truncation": _TRUNCATION,
    "include": Field(("array", "null"), items=Field(("string",), choices=("item.input_audio_transcription.logprobs",))),
    "tracing": _TRACING,
    "prompt": Field(
        ("object", "null"),
        fields={"id": Field(("string",), required=True), "variables": _OPEN, "version": _STR_OR_NULL},
    ),
    "reasoning": REASONING,
    "parallel_tool_calls": _BOOL,
}

# A transcription session (``?intent=transcription``): input audio only, no model, no responses.
TRANSCRIPTION_SESSION_SCHEMA: Schema = {
    "type": Field(("string",), required=True, choices=("realtime", "transcription")),
    "audio": Field(("object",), fields={"input": _AUDIO.fields["input"]}),  # type: ignore[index]
    "include": SESSION_SCHEMA["include"],
}
