"""The effective session config: defaults, ``session.update`` validation and merging.

Rules (docs/protocol.md §6, §12): ``session.type`` is required on every update and must
match the session's kind (``realtime``, or ``transcription`` for ``?intent=transcription``);
``null`` in an optional field is "not given"; unknown and beta keys are rejected; a
rejected update is discarded whole; fields left out are unchanged; ``null`` turns
``turn_detection`` / ``noise_reduction`` / ``transcription`` off; nested objects that
are given (format, turn detection, transcription) replace the old ones, with the
service defaults filled in; the voice cannot change once the assistant has produced
audio; the model cannot change at all; ``reasoning`` / ``parallel_tool_calls`` are for
reasoning models only.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from voxline.base.models import DEFAULT_TRANSCRIPTION_MODEL
from voxline.base.audio_format import PCM16_24K, AudioFormat
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.nulls import without_nulls
from voxline.realtime.server.engine.session_schema import SESSION_SCHEMA, TRANSCRIPTION_SESSION_SCHEMA
from voxline.realtime.server.engine.usage import text_tokens
from voxline.realtime.server.engine.validate import check_object

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "NON_REASONING_MODELS",
    "SessionConfig",
    "check_modalities",
    "check_reasoning",
    "no_responses",
    "realtime_on_transcription",
    "default_server_vad",
]

# Realtime models the openai package lists that are not reasoning models: ``reasoning`` and
# ``parallel_tool_calls`` are "only supported by reasoning Realtime models such as
# gpt-realtime-2" (SDK docstrings). Any other name, including ones newer than this list, may use them.
NON_REASONING_MODELS = frozenset({
    "gpt-realtime",
    "gpt-realtime-2025-08-28",
    "gpt-realtime-1.5",
    "gpt-realtime-mini",
    "gpt-realtime-mini-2025-10-06",
    "gpt-realtime-mini-2025-12-15",
    "gpt-4o-realtime-preview",
    "gpt-4o-realtime-preview-2024-10-01",
    "gpt-4o-realtime-preview-2024-12-17",
    "gpt-4o-realtime-preview-2025-06-03",
    "gpt-4o-mini-realtime-preview",
    "gpt-4o-mini-realtime-preview-2024-12-17",
    "gpt-audio-1.5",
    "gpt-audio-mini",
    "gpt-audio-mini-2025-10-06",
    "gpt-audio-mini-2025-12-15",
})


def realtime_on_transcription() -> ErrorSpec:
    """The mirror of the service's error for a transcription update on a realtime session."""
    message = "Passing a realtime session update event to a transcription session is not allowed."
    return ErrorSpec(message, "invalid_parameter", "session.type")


def no_responses() -> ErrorSpec:
    """``response.create`` in a transcription session (it transcribes; it does not answer)."""
    return ErrorSpec("A transcription session does not create responses.", "invalid_request", "type")


def check_reasoning(params: dict[str, Any], model: str, path: str) -> None:
    """Refuse ``reasoning`` / ``parallel_tool_calls`` for a model that is not a reasoning model."""
    if model not in NON_REASONING_MODELS:
        return
    for key in ("reasoning", "parallel_tool_calls"):
        if key in params:
            where = f"{path}.{key}"
            message = f"Unsupported parameter: '{where}' is not supported with this model."
            raise RequestRejected(ErrorSpec(message, "unsupported_parameter", where))


def check_modalities(params: dict[str, Any], path: str) -> None:
    """``output_modalities`` is ``["audio"]`` or ``["text"]``: never both, never none (the SDK's session and
    response types alike)."""
    modalities = params.get("output_modalities")
    if modalities is not None and len(set(modalities)) != 1:
        where = f"{path}.output_modalities"
        message = f"Invalid '{where}': use either ['audio'] or ['text']."
        raise RequestRejected(errors.invalid_value(where, message))


DEFAULT_INSTRUCTIONS = (
    "You are the voxline local server, a stand-in for a speech-to-speech model. "
    "You detect speech by its energy and answer with scripted replies; you do not understand speech."
)

_PCM = PCM16_24K.to_wire()


METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512  # as the SDK documents ``metadata``


def check_metadata(metadata: dict[str, str] | None, path: str) -> None:
    """At most 16 key-value pairs, keys of at most 64 characters, values of at most 512 (the schema has checked
    that each value is a string)."""
    if not metadata:
        return
    if len(metadata) > METADATA_PAIRS:
        raise RequestRejected(errors.invalid_value(path, f"Invalid '{path}': at most {METADATA_PAIRS} key-value pairs, "
                                                         f"not {len(metadata)}."))
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_CHARS:
            raise RequestRejected(errors.invalid_value(path, f"Invalid '{path}': a key of at most {METADATA_KEY_CHARS} "
                                                             f"characters, not {len(key)}."))
        if len(value) > METADATA_VALUE_CHARS:
            raise RequestRejected(errors.invalid_value(f"{path}.{key}", f"Invalid '{path}.{key}': a value of at most "
                                                       f"{METADATA_VALUE_CHARS} characters, not {len(value)}."))


def default_server_vad() -> dict[str, Any]:
    """``server_vad`` with the defaults the service sends in ``session.created``.

    ``silence_duration_ms`` is 200 as in published GA ``session.created`` traces and
    LiveKit's defaults "got from a default session" (docs/protocol.md §12), not the 500 of the
    SDK's docstring.
    """
    return {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 200,
        "idle_timeout_ms": None,
        "create_response": True,
        "interrupt_response": True,
    }


def _default_semantic_vad() -> dict[str, Any]:
    return {"type": "semantic_vad", "eagerness": "auto", "create_response": True, "interrupt_response": True}


def _defaults(model: str, instructions: str) -> dict[str, Any]:
    return {
        "type": "realtime",
        "model": model,
        "output_modalities": ["audio"],
        "instructions": instructions,
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "include": None,
        "audio": {
            "input": {
                "format": dict(_PCM),
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": default_server_vad(),
            },
            "output": {"format": dict(_PCM), "voice": "alloy", "speed": 1.0},
        },
    }


def _transcription_defaults() -> dict[str, Any]:
    return {
        "type": "transcription",
        "audio": {
            "input": {
                "format": dict(_PCM),
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": default_server_vad(),
            }
        },
        "include": None,
    }


def _filled(key: str, value: Any) -> Any:
    """A nested object given in an update, completed with the service defaults."""
    if value is None:
        return None
    if key == "format":  # already checked against the schema, so it normalises without error
        return AudioFormat.from_wire(value).to_wire()
    if key == "turn_detection":
        base = default_server_vad() if value["type"] == "server_vad" else _default_semantic_vad()
        return {**base, **value}
    if key == "transcription":
        return {"model": DEFAULT_TRANSCRIPTION_MODEL, "language": None, "prompt": None, **value}
    return copy.deepcopy(value)


class SessionConfig:
    """The session as the server applies it; :meth:`view` is what ``session.*`` events carry.

    What the config holds is never changed in place: an update copies the containers on the way to each
    field it sets and a deep copy of what the update gave, so its cost is that of the update, not of the
    session it lands in (a session holding megabytes of tools answers a one-field update as fast as any)."""

    def __init__(self, model: str, instructions: str = DEFAULT_INSTRUCTIONS, *, transcription: bool = False) -> None:
        self.kind = "transcription" if transcription else "realtime"
        self.object_name = "realtime.transcription_session" if transcription else "realtime.session"
        """The session resource's ``object``."""
        self._config = _transcription_defaults() if transcription else _defaults(model, instructions)
        self.tools_tokens = 0  # the tools as JSON, in tokens: what each response reads of them

    def view(self, identity: dict[str, Any] | None = None) -> dict[str, Any]:
        """The effective config, with ``id``/``object``/``expires_at`` if given: new containers down to the
        audio fields, the values themselves shared (an event encodes them; nothing may change them)."""
        out = dict(self._config)
        if "audio" in out:
            out["audio"] = {side: dict(fields) for side, fields in out["audio"].items()}
        return {**identity, **out} if identity else out

    def update(self, session: Any, *, voice_locked: bool) -> None:
        """Validate and apply one ``session.update`` payload, or raise without changing anything."""
        if not isinstance(session, dict):
            raise RequestRejected(errors.invalid_type("session", "an object", "a value of another type"))
        schema = SESSION_SCHEMA if self.kind == "realtime" else TRANSCRIPTION_SESSION_SCHEMA
        session = without_nulls(session, schema)
        if session.get("type") in ("realtime", "transcription") and session["type"] != self.kind:
            raise RequestRejected(
                errors.transcription_on_realtime() if self.kind == "realtime" else realtime_on_transcription()
            )
        check_object(session, schema, "session")
        self._check_rules(session, voice_locked)
        merged = dict(self._config)
        for key, value in session.items():
            if key == "audio":
                audio = merged["audio"] = dict(merged["audio"])
                for side, fields in value.items():
                    part = audio[side] = dict(audio[side])
                    for name, field in fields.items():
                        part[name] = _filled(name, field)
            else:
                merged[key] = copy.deepcopy(value)
        if "tools" in session:
            tools = merged["tools"]
            self.tools_tokens = text_tokens(json.dumps(tools)) if tools else 0
        self._config = merged

    def _check_rules(self, session: dict[str, Any], voice_locked: bool) -> None:
        model = session.get("model")
        if model is not None and model != self._config["model"]:
            raise RequestRejected(errors.invalid_value("session.model", "The model of a session cannot be changed."))
        check_reasoning(session, self.model, "session")
        check_modalities(session, "session")
        voice = session.get("audio", {}).get("output", {}).get("voice")
        if voice is not None and voice_locked and voice != self._config["audio"]["output"]["voice"]:
            raise RequestRejected(errors.cannot_update_voice())

    # Accessors the engine uses.

    @property
    def turn_detection(self) -> dict[str, Any] | None:
        td = self._config["audio"]["input"]["turn_detection"]
        return dict(td) if td is not None else None

    @property
    def input_format(self) -> AudioFormat:
        return AudioFormat.from_wire(self._config["audio"]["input"]["format"])

    @property
    def output_modalities(self) -> list[str]:
        return list(self._config["output_modalities"])

    @property
    def transcription(self) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self._config["audio"]["input"]["transcription"]
        return value

    @property
    def output(self) -> dict[str, Any]:
        return copy.deepcopy(self._config["audio"]["output"])

    @property
    def max_output_tokens(self) -> int | str:
        value: int | str = self._config["max_output_tokens"]
        return value

    @property
    def instructions(self) -> str:
        return str(self._config["instructions"])

    @property
    def model(self) -> str:
        return str(self._config.get("model", ""))
