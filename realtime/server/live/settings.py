"""A Live session's settings: the server's knobs, and a session's resolved start configuration.

:class:`LiveConfig` is how the local server runs every Live session (``ServerConfig.live``).
:class:`LiveSettings` is one session's configuration after ``session.start`` (or the
WebRTC ``POST``): checked, defaults filled in, and rendered as the ``session`` resource of
``session.started`` / ``updated`` / ``closed``. Voice, format, instructions and history are
fixed at start; only delegation settings and triggers change afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from voxline.base.arguments import as_error, real, text, whole
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.validate import check_object
from voxline.realtime.server.live import errors as live_errors
from voxline.realtime.server.live.audio import LiveFormat
from voxline.realtime.server.live.schema import FORK_START, MEDIA_SESSION, SESSION_START

__all__ = ["DEFAULT_LIVE_INSTRUCTIONS", "MAX_INPUT_ITEMS", "LiveConfig", "LiveSettings", "Transport", "fork_settings",
           "start_settings"]

Transport = Literal["websocket", "webrtc"]

DEFAULT_LIVE_INSTRUCTIONS = (
    "You are the voxline local server standing in for a Live model: you answer with scripted "
    "replies in a synthetic voice, and stop speaking when you hear the caller."
)

MAX_INPUT_ITEMS = 128
"""Messages a session's startup input holds at most: a client's, and a fork's (the newest of what was said)."""


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """How the local server runs Live sessions.

    - ``max_session_s``: a session's length before it closes with ``expired`` (the service: about two hours).
    - ``reply_latency_ms``: timeline time between the end of the caller's turn and the reply.
    - ``frame_ms``: the output track's frame (the service sends ten frames a second).
    - ``usage_every_s``: timeline seconds between ``session.usage.updated`` events.
    - ``close_on_text``: a phrase that, appended as instructions, thinking or commentary, makes the
      stand-in's "safety filter" end the session with reason ``content`` (a fault for tests).
    - ``vad_threshold`` / ``vad_silence_ms``: the stand-in's ear (energy VAD).
    """

    max_session_s: float = 7200.0
    reply_latency_ms: int = 300
    frame_ms: int = 100
    usage_every_s: float = 60.0
    close_on_text: str | None = None
    vad_threshold: float = 0.5
    vad_silence_ms: int = 500

    def __post_init__(self) -> None:
        with as_error(ConfigurationError, "LiveConfig"):
            real(self.max_session_s, "max_session_s (the Live session limit, in seconds)", low=0, above=True)
            if whole(self.frame_ms, "frame_ms", low=10, high=1000) % 10:
                raise ValueError(f"frame_ms takes 10..1000 ms in steps of 10, not {self.frame_ms}")
            whole(self.reply_latency_ms, "reply_latency_ms", low=0)
            whole(self.vad_silence_ms, "vad_silence_ms", low=0)
            real(self.usage_every_s, "usage_every_s", low=0, above=True)
            real(self.vad_threshold, "vad_threshold", low=0, high=1)
            if self.close_on_text is not None:
                text(self.close_on_text, "close_on_text")


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """One session's resolved configuration."""

    model: str
    transport: Transport = "websocket"
    format: LiveFormat = field(default_factory=LiveFormat)
    voice: str | dict[str, Any] = "marin"
    instructions: str = DEFAULT_LIVE_INSTRUCTIONS
    delegation: dict[str, Any] = field(default_factory=lambda: {"type": "client", "acknowledgement_delay_ms": 0})
    input: tuple[dict[str, Any], ...] = ()
    store: bool = False
    client: dict[str, Any] | None = None
    triggers: tuple[dict[str, Any], ...] = ()
    safety_identifier: str | None = None

    @property
    def delegation_type(self) -> str:
        return str(self.delegation["type"])

    def resource(self, session_id: str, expires_at: int) -> dict[str, Any]:
        """The ``session`` object of ``session.started`` / ``updated`` / ``closed``."""
        audio: dict[str, Any] = {"output": {"voice": self.voice}}
        if self.transport == "websocket":
            audio["format"] = self.format.wire()
        view: dict[str, Any] = {
            "id": session_id,
            "expires_at": expires_at,
            "model": self.model,
            "status": "active",
            "audio": audio,
            "delegation": self.delegation,
            "input": list(self.input),
            "instructions": self.instructions,
            "store": self.store,
            "triggers": list(self.triggers),
        }
        if self.client is not None:
            view["client"] = self.client
        if self.safety_identifier is not None:
            view["safety_identifier"] = self.safety_identifier
        return view

    def updated(self, session: dict[str, Any]) -> LiveSettings:
        """Apply a ``session.update`` (already schema-checked): delegation settings and triggers only."""
        result = self
        if session.get("delegation") is not None:
            change = session["delegation"]
            if change["type"] != self.delegation_type:
                raise RequestRejected(live_errors.delegation_mismatch("session.update", change["type"], self.delegation_type))
            merged = dict(self.delegation)
            for key, value in change.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
            result = replace(result, delegation=merged)
        if "triggers" in session:
            result = replace(result, triggers=tuple(session["triggers"]))
        return result


def _given(session: dict[str, Any]) -> dict[str, Any]:
    """A start's fields, a null one taken as not given (but ``delegation``, where null turns it off)."""
    return {k: v for k, v in session.items() if v is not None or k == "delegation"}


def start_settings(session: Any, transport: Transport) -> LiveSettings:
    """Resolve the ``session`` of ``session.start`` (WebSocket) or of the WebRTC ``POST``."""
    if not isinstance(session, dict):
        raise RequestRejected(errors.invalid_type("session", "an object", "another value"))
    session = _given(session)
    check_object(session, SESSION_START if transport == "websocket" else MEDIA_SESSION, "session")
    model = session["model"]
    if not model.startswith("gpt-live"):
        raise RequestRejected(live_errors.unsupported_model(model))
    audio = session.get("audio") or {}
    settings = LiveSettings(
        model=model,
        transport=transport,
        format=_format(audio.get("format"), "session.audio.format"),
        voice=_voice((audio.get("output") or {}).get("voice", "marin")),
        instructions=(session.get("instructions") or "").strip() or DEFAULT_LIVE_INSTRUCTIONS,
        input=_history(session.get("input") or []),
        store=bool(session.get("store", False)),
        client=session.get("client"),
        triggers=tuple(session.get("triggers") or ()),
        safety_identifier=session.get("safety_identifier"),
    )
    delegation = session.get("delegation")
    if delegation is not None:
        settings = replace(settings, delegation=_delegation(delegation))
    return settings


def fork_settings(stored: LiveSettings, overrides: Any, transport: Transport) -> LiveSettings:
    """A fork's settings: the stored session's, with the few overrides a fork accepts."""
    if not isinstance(overrides, dict):
        raise RequestRejected(errors.invalid_type("session", "an object", "another value"))
    overrides = _given(overrides)  # a fork's start reads null as not given, as a start does
    check_object(overrides, FORK_START, "session")
    if transport == "webrtc" and "audio" in overrides:
        raise RequestRejected(errors.invalid_value("session.audio", "A WebRTC fork negotiates its audio format; omit session.audio."))
    if transport == "websocket" and "client" in overrides:
        raise RequestRejected(errors.invalid_value("session.client", "Client permissions apply to WebRTC forks only."))
    settings = replace(stored, transport=transport, client=overrides.get("client", stored.client))
    if "audio" in overrides and overrides["audio"].get("format") is not None:
        settings = replace(settings, format=_format(overrides["audio"]["format"], "session.audio.format"))
    elif transport == "websocket" and stored.transport != "websocket":
        settings = replace(settings, format=LiveFormat())
    if "store" in overrides:
        settings = replace(settings, store=bool(overrides["store"]))
    if "delegation" in overrides:
        settings = settings.updated({"delegation": overrides["delegation"]})
    return settings


def _format(value: Any, path: str) -> LiveFormat:
    if value is None:
        return LiveFormat()
    kind, rate = value["type"], value["rate"]
    allowed = (16_000, 24_000) if kind == "audio/pcm" else (8_000,)
    if rate not in allowed:
        shown = " or ".join(str(r) for r in allowed)
        raise RequestRejected(errors.invalid_value(f"{path}.rate", f"Invalid '{path}.rate': {kind} takes {shown} Hz, not {rate}."))
    return LiveFormat(kind, int(rate))


def _voice(value: Any) -> str | dict[str, Any]:
    if isinstance(value, str) and not value.strip():
        raise RequestRejected(errors.invalid_value("session.audio.output.voice", "The voice must not be empty."))
    return value if isinstance(value, str) else {"id": value["id"]}


def _history(items: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    if len(items) > MAX_INPUT_ITEMS:
        message = f"Invalid 'session.input': {len(items)} messages is more than the maximum of {MAX_INPUT_ITEMS}."
        raise RequestRejected(errors.invalid_value("session.input", message))
    history: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        path = f"session.input[{index}]"
        if len(item["content"]) != 1:
            raise RequestRejected(errors.invalid_value(f"{path}.content", f"Invalid '{path}.content': give exactly one text part."))
        part = item["content"][0]
        wanted = ("text", "output_text") if item["role"] == "assistant" else ("input_text",)
        if part.get("type", wanted[0]) not in wanted:
            choices = " or ".join(wanted)
            raise RequestRejected(errors.invalid_value(f"{path}.content[0].type", f"Invalid '{path}.content[0].type': expected {choices}."))
        history.append(item)
    return tuple(history)


def _delegation(value: dict[str, Any]) -> dict[str, Any]:
    if value["type"] == "decisions":
        raise RequestRejected(live_errors.not_supported_locally("decisions", "session.delegation.type"))
    default_delay = 0
    return {"acknowledgement_delay_ms": default_delay, **value}
