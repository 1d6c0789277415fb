"""Nested models shared by client and server events: items, content parts, responses, errors.

Every model keeps keys it does not declare (``model_extra``), so a field the service
adds tomorrow survives a round trip. Serialising drops ``None`` values that were never
set, so a default ``None`` never reaches the wire while an explicit ``None`` does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
)

from ..errors import RemoteProtocolError

__all__ = [
    "ContentPart",
    "ConversationInfo",
    "ErrorDetail",
    "ErrorInfo",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "Item",
    "MessageItem",
    "RateLimit",
    "Response",
    "ResponseCreateParams",
    "SessionConfig",
    "StatusDetails",
    "UnknownItem",
    "Usage",
    "WireModel",
    "decode_arguments",
]


class WireModel(BaseModel):
    """Base of every wire model: unknown keys kept, unset ``None`` fields left off the wire."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _drop_unset_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        kept = self.model_fields_set
        out = {key: value for key, value in data.items() if value is not None or key in kept}
        if "type" in out:  # ``type`` leads, as in the service's own frames
            out = {"type": out.pop("type"), **out}
        return out


class ErrorDetail(WireModel):
    """The ``error`` object of the ``error`` server event (docs/protocol.md §10)."""

    type: str
    code: str | None = None
    message: str
    param: str | None = None
    event_id: str | None = None


class ErrorInfo(WireModel):
    """A loose error object (failed transcription, failed response): every field optional."""

    type: str | None = None
    code: str | None = None
    message: str | None = None
    param: str | None = None


class ContentPart(WireModel):
    """One content part of a message item.

    GA types are ``input_text``, ``input_audio``, ``input_image``, ``output_text`` and
    ``output_audio``; the beta spellings ``text``/``audio`` are accepted as they are.
    """

    type: str | None = None
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None


class MessageItem(WireModel):
    """A ``message`` conversation item (system, user or assistant)."""

    type: Literal["message"] = "message"
    role: str
    content: list[ContentPart] = Field(default_factory=list)
    id: str | None = None
    status: str | None = None
    object: str | None = None


def decode_arguments(arguments: str, *, name: str | None, call_id: str | None) -> Any:
    """Decode a function call's ``arguments`` JSON once; empty text means no arguments."""
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "input"
        raise RemoteProtocolError(
            f"function call {name!r} (call_id {call_id!r}) has arguments that are not valid JSON at {where}"
        ) from None


class FunctionCallItem(WireModel):
    """A ``function_call`` item; ``arguments`` stays the raw JSON text the model produced."""

    type: Literal["function_call"] = "function_call"
    call_id: str | None = None
    name: str
    arguments: str = ""
    id: str | None = None
    status: str | None = None
    object: str | None = None

    def parsed_arguments(self) -> Any:
        """The arguments decoded once; :class:`RemoteProtocolError` if they are not JSON."""
        return decode_arguments(self.arguments, name=self.name, call_id=self.call_id)


class FunctionCallOutputItem(WireModel):
    """A ``function_call_output`` item: the tool's result as one string."""

    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str
    id: str | None = None
    status: str | None = None
    object: str | None = None


class UnknownItem(WireModel):
    """Any other item (MCP calls, approval requests, future kinds), kept whole."""

    type: str


_KNOWN_ITEMS = frozenset({"message", "function_call", "function_call_output"})


def _item_tag(value: Any) -> str:
    """Pick the item model by ``type``; anything unrecognised becomes :class:`UnknownItem`."""
    if isinstance(value, UnknownItem):
        return "unknown"
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in _KNOWN_ITEMS else "unknown"


Item = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[UnknownItem, Tag("unknown")],
    ],
    Discriminator(_item_tag),
]
"""A conversation item; unknown item types never fail validation."""


class StatusDetails(WireModel):
    """``response.status_details``: why a response ended as it did."""

    type: str | None = None
    reason: str | None = None
    error: ErrorInfo | None = None


class Usage(WireModel):
    """``response.usage`` token counts; the detail objects are kept as plain dicts."""

    total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_token_details: dict[str, Any] | None = None
    output_token_details: dict[str, Any] | None = None


class Response(WireModel):
    """The ``response`` object of ``response.created`` / ``response.done``."""

    id: str
    object: str | None = None
    status: str | None = None
    status_details: StatusDetails | None = None
    output: list[Item] | None = None
    usage: Usage | None = None
    conversation_id: str | None = None
    output_modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    max_output_tokens: int | Literal["inf"] | None = None
    metadata: dict[str, str] | None = None


class ResponseCreateParams(WireModel):
    """The optional ``response`` of ``response.create`` (docs/protocol.md §4); loose by design."""

    output_modalities: list[str] | None = None
    instructions: str | None = None
    conversation: str | None = None
    metadata: dict[str, str] | None = None
    input: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_output_tokens: int | Literal["inf"] | None = None
    audio: dict[str, Any] | None = None


class SessionConfig(WireModel):
    """A session configuration (``session.update`` / ``session.created`` / ``session.updated``).

    Loose on purpose: ``type`` is ``"realtime"`` or ``"transcription"``; every other key is
    carried as given (docs/protocol.md §6).
    """

    type: str | None = None
    model: str | None = None
    instructions: str | None = None
    output_modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_output_tokens: int | Literal["inf"] | None = None


class ConversationInfo(WireModel):
    """``conversation`` of ``conversation.created``."""

    id: str | None = None
    object: str | None = None


class RateLimit(WireModel):
    """One entry of ``rate_limits.updated``."""

    name: str | None = None
    limit: int | None = None
    remaining: int | None = None
    reset_seconds: float | None = None
