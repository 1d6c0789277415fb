"""Session configuration from arguments and environment variables (pydantic settings).

Environment: ``VOXLINE_URL`` (else ``OPENAI_BASE_URL``), ``OPENAI_API_KEY`` (or
``VOXLINE_API_KEY``), ``VOXLINE_MODEL`` (default ``gpt-realtime-2.1``),
``VOXLINE_TRANSCRIPTION_MODEL`` (default ``gpt-transcribe``, used where the user is transcribed), ``VOXLINE_VOICE``, ``VOXLINE_INSTRUCTIONS``,
``VOXLINE_TURN_DETECTION`` (``server_vad``, ``semantic_vad`` or ``none`` for
push-to-talk), ``VOXLINE_INPUT_CHUNK_MS`` (microphone audio per append, default 40), ``VOXLINE_TRANSPORT`` (``ws`` or ``webrtc``), ``VOXLINE_INPUT_DEVICE``, ``VOXLINE_OUTPUT_DEVICE``,
``VOXLINE_CALL_ID`` (attach to that running WebRTC call as its sideband, with the API key: the
session sends no audio and plays none, its tools and mirror run here while the media runs elsewhere). The key is a
``SecretStr``: it never shows in a repr or a log. A variable set to the empty string counts as unset, here and in
every command (:func:`env`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, assert_never

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_serializer, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from voxline.base.arguments import unicode_text
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.redaction import redact_url
from voxline.base.shown import printable, shown_value
from voxline.base.models import DEFAULT_LIVE_MODEL, DEFAULT_REALTIME_MODEL, DEFAULT_TRANSCRIPTION_MODEL
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES, json_text_bytes
from voxline.base.urls import url_problem

from voxline.realtime.errors import ConfigurationError, UsageError

__all__ = ["DEFAULT_URL", "MIN_LIVENESS_S", "SessionSettings", "SettingsError", "UsageError", "api_key_from_env", "env", "key_text",
           "load_settings"]

DEFAULT_URL = "wss://api.openai.com/v1"


class SettingsError(ConfigurationError):
    """A setting that cannot be used, as one line: the setting (:attr:`field`), or the environment
    variable it came from (:attr:`variable`), the value unless it is the key, and what is allowed; a
    name that is no setting gets the nearest one suggested."""

    def __init__(self, cls: type[BaseSettings], exc: ValidationError, given: Iterable[str] = ()) -> None:
        first = exc.errors()[0]
        named = str(first["loc"][0]) if first["loc"] else ""
        self.field = _FIELD_OF.get(named, named)  # pydantic names a value read from a variable by that variable
        self.problem = first["msg"].removeprefix("Value error, ")  # a validator's own words, as it wrote them
        self.value = None if self.field == "api_key" else first.get("input")
        if self.field == "url" and isinstance(self.value, str):
            self.value = redact_url(self.value)  # a key it carries is never shown
        self.variable: str | None = None
        if first["type"] in ("extra_forbidden", "no_such_attribute"):
            near = difflib.get_close_matches(self.field, cls.model_fields, n=1)
            self.problem = "not a setting" + (f" (did you mean {near[0]!r}?)" if near else "")
            self.value = None
        elif self.field not in given:  # not an argument: the environment gave it
            self.variable = _variable(self.field)
        shown = "" if self.value is None else f"={shown_value(self.value)}"
        where = f"{self.variable}{shown}" if self.variable is not None else f"{cls.__name__}({self.field}{shown})"
        super().__init__(f"{where}: {self.problem}")



def _variable(field: str) -> str:
    """The environment variable a field's value came from (the first set of its names)."""
    names = _ENV_ALIASES.get(field, (f"VOXLINE_{field.upper()}",))
    return next((name for name in names if _set(os.environ.get(name))), names[-1])


_ENV_ALIASES = {"url": ("VOXLINE_URL", "OPENAI_BASE_URL"), "api_key": ("VOXLINE_API_KEY", "OPENAI_API_KEY")}
_FIELD_OF = {name: field for field, names in _ENV_ALIASES.items() for name in names}


def _set(value: str | None) -> bool:
    """An environment variable's value counts: one that is empty, or only spaces, is unset."""
    return value is not None and not value.isspace() and value != ""


def env(*names: str) -> str | None:
    """The first of the environment variables ``names`` that is set to something; an empty one (or one of
    spaces only) is unset."""
    return next((value for name in names if _set(value := os.environ.get(name))), None)


def key_text(key: SecretStr | str | None) -> str | None:
    """A settings' ``api_key`` as text (None: none given)."""
    return key.get_secret_value() if isinstance(key, SecretStr) else key


def api_key_from_env() -> str | None:
    """``VOXLINE_API_KEY``, else ``OPENAI_API_KEY`` (the order :class:`SessionSettings` reads them in)."""
    return env("VOXLINE_API_KEY", "OPENAI_API_KEY")


MIN_LIVENESS_S = 1.0
"""The shortest :attr:`SessionSettings.liveness_timeout_s` but 0 (never)."""

_MAX_INSTRUCTIONS = MAX_CLIENT_EVENT_BYTES - 4 * 1024 * 1024  # the rest of a session.update (tools…) has room left


class SessionSettings(BaseSettings):
    # hide_input_in_errors: a value of the wrong type (a key passed as a list, say) is not echoed back
    # extra="forbid": a misspelt keyword is an error, not a default silently kept (environment
    # variables are read only for the fields, so an unknown VOXLINE_* variable is still ignored)
    # validate_assignment: a field set after the settings were made is checked as one given to them
    model_config = SettingsConfigDict(env_prefix="VOXLINE_", extra="forbid", populate_by_name=True,
                                      env_ignore_empty=True, hide_input_in_errors=True, validate_assignment=True)

    if TYPE_CHECKING:  # what a type checker takes: the fields as keywords, the key as text too
        def __init__(
            self,
            *,
            url: str = DEFAULT_URL,
            api_key: SecretStr | str | None = None,
            model: str = DEFAULT_REALTIME_MODEL,
            transcription_model: str = DEFAULT_TRANSCRIPTION_MODEL,
            transcribe: bool = False,
            voice: str | None = None,
            instructions: str | None = None,
            turn_detection: Literal["server_vad", "semantic_vad", "none"] = "server_vad",
            transport: Literal["ws", "webrtc"] = "ws",
            call_id: str | None = None,
            input_device: str | None = None,
            output_device: str | None = None,
            reconnect_attempts: int = 5,
            reconnect_window_s: float = 120.0,
            reconnect_stable_s: float = 30.0,
            liveness_timeout_s: float = 30.0,
            close_timeout_s: float = 2.0,
            max_tool_rounds: int = 16,
            handover_s: float = 120.0,
            vad_threshold: float = 0.5,
            silence_ms: int = 500,
            prefix_padding_ms: int = 300,
            api: Literal["realtime", "live"] = "realtime",
            live_model: str = DEFAULT_LIVE_MODEL,
            live_store: bool = False,
            live_backend_model: str = "gpt-5.4-mini",
            input_chunk_ms: int = 40,
            rebuild_items: int = 512,
        ) -> None: ...
    else:
        def __init__(self, **values: Any) -> None:
            """As pydantic's, but a bad value is one :class:`SettingsError` line."""
            try:
                super().__init__(**values)
            except ValidationError as exc:
                raise SettingsError(type(self), exc, values) from None

    def __setattr__(self, name: str, value: Any) -> None:
        """As pydantic's, validated, but a bad value is one :class:`SettingsError` line."""
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise SettingsError(type(self), exc, (name,)) from None

    url: str = Field(default=DEFAULT_URL, validation_alias=AliasChoices("VOXLINE_URL", "OPENAI_BASE_URL", "url"))
    """The service's URL. A key it carries (``user:KEY@``, ``?api-key=``) is used, and like ``api_key`` never shown:
    the settings' repr and their dumps (``model_dump()``, ``model_dump_json()``, often logged) redact it. So a dump
    is for showing, not for making settings again (``model_copy()`` keeps the key; pickling does too)."""
    api_key: SecretStr | None = Field(default=None,
                                      validation_alias=AliasChoices("VOXLINE_API_KEY", "OPENAI_API_KEY", "api_key"))
    """The key, given as a ``str`` or a ``SecretStr`` and kept as a ``SecretStr`` (``model_copy(update=...)`` does not
    validate: give it a ``SecretStr`` there)."""
    model: str = DEFAULT_REALTIME_MODEL
    transcription_model: str = DEFAULT_TRANSCRIPTION_MODEL
    transcribe: bool = False
    voice: str | None = None
    instructions: str | None = None
    turn_detection: Literal["server_vad", "semantic_vad", "none"] = "server_vad"
    transport: Literal["ws", "webrtc"] = "ws"
    call_id: str | None = Field(default=None, min_length=1)
    input_device: str | None = None
    output_device: str | None = None
    reconnect_attempts: int = Field(default=5, ge=0)
    reconnect_window_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    """Give up reconnecting once this long has passed since the drop (with ``reconnect_attempts``)."""
    reconnect_stable_s: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    """A connection must stay up this long before a later drop gets a fresh reconnect budget."""
    liveness_timeout_s: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    """A server silent this long while an answer is due counts as a drop (0: never; else at least
    :data:`MIN_LIVENESS_S`: a server is given its round trip before it is given up on)."""
    close_timeout_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    """``aclose()`` waits at most this long for the server to acknowledge the close."""
    max_tool_rounds: int = Field(default=16, ge=1, le=10_000)
    """Follow-ups (``response.create`` after a response's tool outputs) in a row without a user turn between them:
    past this the outputs still go, with no follow-up, and a ``tool_rounds_exceeded`` error says so (a model calling
    tools for ever, or a server replaying the same call, would otherwise keep the session busy for good)."""
    handover_s: float = Field(default=120.0, ge=0, allow_inf_nan=False)
    """Move to a fresh connection at a turn boundary this long before the session's ``expires_at`` (0: never)."""
    vad_threshold: float = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    silence_ms: int = Field(default=500, ge=0, le=60_000)  # a minute: beyond it no turn would end
    prefix_padding_ms: int = Field(default=300, ge=0, le=60_000)
    api: Literal["realtime", "live"] = "realtime"
    """The interface: Realtime (``/v1/realtime``) or GPT-Live (``/v1/live/sessions``, docs/protocol.md §14)."""
    live_model: str = DEFAULT_LIVE_MODEL
    live_store: bool = False
    """GPT-Live: store the session, so that after a drop the next connection forks it (its conversation goes on)."""
    live_backend_model: str = "gpt-5.4-mini"
    """GPT-Live with tools: the Responses model the Live model delegates to; its function calls run here."""
    input_chunk_ms: int = Field(default=40, ge=1, le=1000)
    """Microphone audio goes out in appends of this many ms (gathered from the device's 20 ms blocks).

    Each append is a frame and a socket write at both ends, so fewer, larger ones cost less;
    a speech onset reaches the server up to this much later. LiveKit's realtime plugin sends
    100 ms, most clients 20 to 100 ms."""
    rebuild_items: int = Field(default=512, ge=1, le=4096)
    """A new connection (after a drop, or the hand-over before the 60-minute cap) is given the newest this many items
    of the conversation, reaching back to the call of every tool output among them and of every call still owed its
    output (a tool running long holds the window open back to it); older ones are left out and forgotten
    (``ConnectionRestored.older_items``). A conversation of days is tens of thousands of items, far past a model's
    context, each one a create to send."""

    @property
    def asked_model(self) -> str:
        """The model the session asks for: :attr:`live_model` on GPT-Live, else :attr:`model`."""
        return self.live_model if self.api == "live" else self.model

    @field_serializer("url")
    def _url_shown(self, value: str) -> str:
        return redact_url(value)

    @field_serializer("api_key")
    def _key_shown(self, value: SecretStr | str | None) -> SecretStr | None:
        return SecretStr(value) if isinstance(value, str) else value  # one put in by model_copy(update=) as a str

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment without its variables of spaces only: such a variable is unset, as an empty one is
        (``VOXLINE_API_KEY=" "`` leaves ``OPENAI_API_KEY`` to give the key, not a blank key to send)."""
        if isinstance(env_settings, EnvSettingsSource):
            env_settings.env_vars = {name: value for name, value in env_settings.env_vars.items() if _set(value)}
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``True`` is no count or duration (pydantic would take it as 1): said, not taken."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and field.annotation in (int, float):
            raise ValueError(f"takes a number, not {value}")
        return value

    @field_validator("liveness_timeout_s", mode="after")
    @classmethod
    def _liveness(cls, value: float) -> float:
        if 0 < value < MIN_LIVENESS_S:  # each answer a server owes would be given up on before it could come
            raise ValueError(f"is 0 (never) or at least {MIN_LIVENESS_S:g} s: a server silent for less is still "
                             "answering")
        return value

    @field_validator("api_key", mode="after")
    @classmethod
    def _key_given(cls, value: SecretStr | None) -> SecretStr | None:
        """A key given as spaces is a mistake (every server would refuse it, less clearly): leave it out instead."""
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is blank: give the key, or leave it out")
        return value

    @field_validator("model", "live_model", mode="after")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("names no model: give a model's name, or leave it out for the default")
        return value

    @field_validator("voice", "input_device", "output_device", "call_id", "transcription_model",
                     "live_backend_model", mode="after")
    @classmethod
    def _one_name(cls, value: str | None) -> str | None:
        """A name is one line of something. Blank, a device name would pick whichever device matches everything, and
        a voice or call id would be sent for the server to refuse; a line break would split the name where it is
        shown, or the URL or log line it goes into."""
        if value is None:
            return value
        if not value.strip():
            raise ValueError("is blank: give a name, or leave it out")
        if printable(value) != value:
            raise ValueError(f"holds a control character: {shown_value(value)}")
        return value

    @field_validator("url", mode="after")
    @classmethod
    def _service_url(cls, value: str) -> str:
        """A scheme and a host, as on the command line: else the session would fail later, and less clearly."""
        problem = url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _unicode(cls, value: Any, info: ValidationInfo) -> Any:
        """Every text setting is text a JSON peer takes (no lone surrogate), the key included; instructions
        fit in the ``session.update`` that carries them."""
        name = info.field_name or "the value"
        if isinstance(value, SecretStr):
            try:
                value.get_secret_value().encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{name} cannot be sent: it holds a lone surrogate, half of a character") from None
        elif isinstance(value, str):
            unicode_text(value, name)
            if name == "instructions" and (size := json_text_bytes(value)) > _MAX_INSTRUCTIONS:
                raise ValueError(f"instructions are {size} bytes as JSON, and the session.update that carries them "
                                 f"leaves room for at most {_MAX_INSTRUCTIONS}")
        return value

    @property
    def voice_on_track(self) -> bool:
        """The assistant's voice comes on a media track (WebRTC, this end holding the call's media), not in events; a
        sideband (``call_id``) leaves the media to the side that holds it."""
        return self.transport == "webrtc" and self.call_id is None

    @property
    def input_chunk_samples(self) -> int:
        """:attr:`input_chunk_ms` in samples at 24 kHz."""
        return self.input_chunk_ms * SAMPLE_RATE // 1000

    def live_session_config(self, tools: list[dict[str, Any]] | None = None, *,
                            history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The ``session.start`` body of a GPT-Live session on a WebSocket (PCM16 24 kHz both ways).

        With tools, the Live model delegates to a Responses model whose function calls this
        client runs; without, delegated work comes to the application (client delegation).
        ``history`` is text-only conversation to begin with (a new session after a drop).
        """
        session: dict[str, Any] = {"model": self.live_model,
                                   "audio": {"format": {"type": "audio/pcm", "rate": 24000}}}
        if self.voice:
            session["audio"]["output"] = {"voice": self.voice}
        if self.instructions is not None:
            session["instructions"] = self.instructions
        if tools:
            session["delegation"] = {"type": "responses",
                                     "responses": {"model": self.live_backend_model, "tools": tools}}
        else:
            session["delegation"] = {"type": "client"}
        if self.live_store:
            session["store"] = True
        if history:
            session["input"] = history
        return session

    def session_config(self, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The ``session.update`` body for these settings."""
        td: dict[str, Any] | None
        match self.turn_detection:
            case "none":
                td = None
            case "semantic_vad":
                td = {"type": "semantic_vad", "create_response": True, "interrupt_response": True}
            case "server_vad":
                td = {"type": "server_vad", "threshold": self.vad_threshold, "prefix_padding_ms": self.prefix_padding_ms,
                      "silence_duration_ms": self.silence_ms, "create_response": True, "interrupt_response": True}
            case unknown:  # only model_copy(update=...), which checks nothing, can put another value here
                assert_never(unknown)
        output: dict[str, Any] = {"format": {"type": "audio/pcm", "rate": 24000}}
        if self.voice:
            output["voice"] = self.voice
        session: dict[str, Any] = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": td},
                      "output": output},
        }
        if self.transcribe:
            session["audio"]["input"]["transcription"] = {"model": self.transcription_model}
        if self.instructions is not None:
            session["instructions"] = self.instructions
        if tools is not None:
            session["tools"] = tools
        if self.call_id is not None:  # a sideband leaves the call's audio to the side that holds the media
            del session["audio"]
        return session

    def __repr_args__(self) -> Any:
        """The fields as pydantic shows them, with the URL's secrets (userinfo, ``?api-key=``…) redacted."""
        for name, value in super().__repr_args__():
            if name == "api_key" and isinstance(value, str):  # one put in by model_copy(update=) as a str
                value = SecretStr(value)
            yield name, (redact_url(value) if name == "url" and isinstance(value, str) else value)


S = TypeVar("S", bound=SessionSettings)


def load_settings(cls: type[S] = SessionSettings, /, **flags: Any) -> S:  # type: ignore[assignment]
    """``cls`` from the command-line values in ``flags`` (``None``: not given) and the environment.

    A bad value is one :class:`ConfigurationError` line naming the flag (``--silence-ms``) or
    the variable (``VOXLINE_TRANSPORT``), the value, and what is allowed; never a key's value.
    A ``model`` flag names the model of the interface the settings choose: ``live_model`` for GPT-Live.
    """
    given = {name: value for name, value in flags.items() if value is not None}
    try:
        settings = cls(**given)  # a bad --model fails here, as the Realtime model: the two take the same names
        if settings.api == "live" and "model" in given:  # the interface may come from the environment
            given["live_model"] = given.pop("model")
            settings = cls(**given)
        return settings
    except SettingsError as exc:
        if exc.variable is not None:  # the environment's
            raise ConfigurationError(str(exc)) from None
        flag = f"--{exc.field.replace('_', '-')}"  # a flag's value is a usage error
        if exc.value is None:  # not a setting, or the key: "--api-key: …" would read as the key itself, and be redacted
            raise UsageError(f"{flag} — {exc.problem}") from None
        raise UsageError(f"{flag}={exc.value!r}: {exc.problem}") from None
