"""Schemas of the Live client events the local server accepts (strict: unknown keys are refused).

Checked with the Realtime engine's validator (:mod:`voxline.realtime.server.engine.validate`),
so the errors read the same. The Responses and Decisions configuration objects are open
(their content is the Responses API's, which the stand-in does not run); everything else is
closed. Which events a connection may send is its own: a sideband has no audio and no
``session.start``.
"""

from __future__ import annotations

from voxline.realtime.server.engine.validate import Field, Schema

__all__ = [
    "BUILT_IN_VOICES",
    "CLIENT_TYPES",
    "EVENT_SCHEMAS",
    "FORK_START",
    "MEDIA_SESSION",
    "SESSION_START",
    "SIDEBAND_TYPES",
]

BUILT_IN_VOICES = (
    "alloy", "ash", "ballad", "beacon", "bossa", "cedar", "cinder", "coral", "delta", "echo", "gleam", "marin",
    "meridian", "quartz", "ripple", "sage", "shida", "shimmer", "stone", "tempo", "verse", "vesper", "willow",
)

_STR = Field(("string",))
_REQ_STR = Field(("string",), required=True)
_DELAY = Field(("integer",), minimum=0, maximum=60_000)
_HEAD: Schema = {"type": _REQ_STR, "event_id": _STR}

_FORMAT = Field(
    ("object",),
    variants=("type", {
        "audio/pcm": {"type": _STR, "rate": Field(("integer",), required=True)},
        "audio/pcmu": {"type": _STR, "rate": Field(("integer",), required=True)},
        "audio/pcma": {"type": _STR, "rate": Field(("integer",), required=True)},
    }),
)
_VOICE = Field(("string", "object"), fields={"id": _REQ_STR})
_OUTPUT = Field(("object",), fields={"voice": _VOICE})
_SELECTORS = Field(("string", "array", "null"))
_CLIENT = Field(("object",), fields={
    "data_channel": Field(("object",), required=True, fields={
        "allowed_client_events": _SELECTORS, "allowed_server_events": _SELECTORS,
    }),
})
_DELEGATION = Field(
    ("object", "null"),
    variants=("type", {
        "client": {"type": _STR, "acknowledgement_delay_ms": _DELAY},
        "responses": {"type": _STR, "acknowledgement_delay_ms": _DELAY,
                      "responses": Field(("object",), required=True)},
        "decisions": {"type": _STR, "acknowledgement_delay_ms": _DELAY,
                      "decisions": Field(("object",), required=True)},
    }),
)
_UPDATE_DELEGATION = Field(
    ("object", "null"),
    variants=("type", {
        "client": {"type": _STR, "acknowledgement_delay_ms": _DELAY},
        "responses": {"type": _STR, "acknowledgement_delay_ms": _DELAY, "responses": Field(("object",))},
        "decisions": {"type": _STR, "acknowledgement_delay_ms": _DELAY, "decisions": Field(("object",))},
    }),
)
_TEXT_PART = Field(("object",), fields={"text": _REQ_STR, "type": _STR})
_MESSAGE = {
    "content": Field(("array",), required=True, items=_TEXT_PART),
    "role": _STR, "id": _STR, "status": Field(("string",), choices=("incomplete", "completed")),
    "type": Field(("string",), choices=("message",)),
}
_INPUT = Field(("array",), items=Field(("object",), variants=("role", {
    "developer": _MESSAGE, "user": _MESSAGE, "assistant": _MESSAGE,
})))
_TRIGGERS = Field(("array",), items=Field(("object",)))

_COMMON_SESSION: Schema = {
    "model": _REQ_STR,
    "audio": Field(("object",), fields={"format": _FORMAT, "output": _OUTPUT}),
    "client": _CLIENT,
    "delegation": _DELEGATION,
    "input": _INPUT,
    "instructions": Field(("string", "null")),
    "safety_identifier": Field(("string", "null")),
    "store": Field(("boolean", "null")),
    "triggers": _TRIGGERS,
}

SESSION_START: Schema = _COMMON_SESSION
"""``session`` of ``session.start`` on a primary WebSocket."""

MEDIA_SESSION: Schema = {
    **{k: v for k, v in _COMMON_SESSION.items() if k != "audio"},
    "audio": Field(("object",), fields={"output": _OUTPUT}),
    "idle_timeout_s": Field(("integer",), minimum=1),
    "wake_policy": Field(("object",), fields={"type": Field(("string",), required=True, choices=("speech",)),
                                              "vad_threshold": Field(("number",), minimum=0, maximum=1)}),
}
"""``session`` of ``POST /v1/live/sessions`` (WebRTC: the media transport negotiates the format)."""

FORK_START: Schema = {
    "audio": Field(("object",), fields={"format": _FORMAT}),
    "client": _CLIENT,
    "delegation": Field(("object",), fields={"type": Field(("string",), required=True, choices=("responses",)),
                                              "acknowledgement_delay_ms": _DELAY, "responses": Field(("object",))}),
    "store": Field(("boolean",)),
}
"""``session`` of ``session.start`` on a fork: overrides only, the model is inherited."""

_CONTEXT = {**_HEAD, "content": _REQ_STR, "delegation_id": Field(("string", "null"), required=True)}

EVENT_SCHEMAS: dict[str, Schema] = {
    "session.start": {**_HEAD, "session": Field(("object",), required=True)},
    "session.update": {**_HEAD, "session": Field(("object",), required=True, fields={
        "delegation": _UPDATE_DELEGATION, "triggers": _TRIGGERS})},
    "session.close": dict(_HEAD),
    "session.input_audio.append": {**_HEAD, "audio": _REQ_STR},
    "session.input_audio.mute": dict(_HEAD),
    "session.input_audio.unmute": dict(_HEAD),
    "session.output_audio.fixture.play": {**_HEAD, "audio": _REQ_STR},
    "session.instructions.append": _CONTEXT,
    "session.thinking.append": _CONTEXT,
    "session.commentary.append": _CONTEXT,
    "response.create": dict(_HEAD),
    "response.item.create": {**_HEAD, "item": Field(("object",), required=True)},
    "decision.create": {**_HEAD, "event_id": _REQ_STR},
    "decision.item.create": {**_HEAD, "item": Field(("object",), required=True)},
    "decision.item.delete": {**_HEAD, "item_id": _REQ_STR},
    "transport.dtmf.send": {**_HEAD, "event": _REQ_STR},
}

CLIENT_TYPES = tuple(t for t in EVENT_SCHEMAS if t != "transport.dtmf.send")
"""What a primary connection may send."""

SIDEBAND_TYPES = tuple(t for t in EVENT_SCHEMAS if t not in ("session.start", "session.input_audio.append"))
"""What a sideband may send: no audio, no start (the session is running)."""
