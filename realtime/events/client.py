"""The 11 GA client events (docs/protocol.md §4), one model each, discriminated on ``type``."""

from __future__ import annotations

import json
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field

from ..errors import LocalProtocolError
from .common import FunctionCallOutputItem, Item, ResponseCreateParams, SessionConfig, WireModel

__all__ = [
    "BETA_CLIENT_EVENT_TYPES",
    "CLIENT_EVENT_CLASSES",
    "CLIENT_EVENT_TYPES",
    "ClientEvent",
    "ClientEventBase",
    "ConversationItemCreate",
    "ConversationItemDelete",
    "ConversationItemRetrieve",
    "ConversationItemTruncate",
    "InputAudioBufferAppend",
    "InputAudioBufferClear",
    "InputAudioBufferCommit",
    "OutputAudioBufferClear",
    "ResponseCancel",
    "ResponseCreate",
    "SessionUpdate",
    "function_call_output",
]


class ClientEventBase(WireModel):
    """Fields every client event has: an optional ``event_id`` echoed back in errors."""

    event_id: str | None = None


class SessionUpdate(ClientEventBase):
    """``session.update``: change the session configuration (``session.type`` is required by GA)."""

    type: Literal["session.update"] = "session.update"
    session: SessionConfig


class InputAudioBufferAppend(ClientEventBase):
    """``input_audio_buffer.append``: base64 audio in the session's input format."""

    type: Literal["input_audio_buffer.append"] = "input_audio_buffer.append"
    audio: str = Field(repr=False)


class InputAudioBufferCommit(ClientEventBase):
    """``input_audio_buffer.commit``: turn the buffered audio into a user item."""

    type: Literal["input_audio_buffer.commit"] = "input_audio_buffer.commit"


class InputAudioBufferClear(ClientEventBase):
    """``input_audio_buffer.clear``: discard the buffered input audio."""

    type: Literal["input_audio_buffer.clear"] = "input_audio_buffer.clear"


class ConversationItemCreate(ClientEventBase):
    """``conversation.item.create``: add an item after ``previous_item_id`` (``"root"`` = first)."""

    type: Literal["conversation.item.create"] = "conversation.item.create"
    item: Item
    previous_item_id: str | None = None


class ConversationItemRetrieve(ClientEventBase):
    """``conversation.item.retrieve``: ask for the server's copy of an item."""

    type: Literal["conversation.item.retrieve"] = "conversation.item.retrieve"
    item_id: str


class ConversationItemTruncate(ClientEventBase):
    """``conversation.item.truncate``: cut an assistant audio part at ``audio_end_ms``."""

    type: Literal["conversation.item.truncate"] = "conversation.item.truncate"
    item_id: str
    content_index: int = 0
    audio_end_ms: int


class ConversationItemDelete(ClientEventBase):
    """``conversation.item.delete``: remove an item from the conversation."""

    type: Literal["conversation.item.delete"] = "conversation.item.delete"
    item_id: str


class ResponseCreate(ClientEventBase):
    """``response.create``: ask the model to respond; ``response`` overrides are optional."""

    type: Literal["response.create"] = "response.create"
    response: ResponseCreateParams | None = None


class ResponseCancel(ClientEventBase):
    """``response.cancel``: stop the active (or the named) response."""

    type: Literal["response.cancel"] = "response.cancel"
    response_id: str | None = None


class OutputAudioBufferClear(ClientEventBase):
    """``output_audio_buffer.clear``: drop server-buffered output audio (WebRTC/SIP only)."""

    type: Literal["output_audio_buffer.clear"] = "output_audio_buffer.clear"


ClientEvent = Annotated[
    Union[
        SessionUpdate,
        InputAudioBufferAppend,
        InputAudioBufferCommit,
        InputAudioBufferClear,
        ConversationItemCreate,
        ConversationItemRetrieve,
        ConversationItemTruncate,
        ConversationItemDelete,
        ResponseCreate,
        ResponseCancel,
        OutputAudioBufferClear,
    ],
    Field(discriminator="type"),
]
"""Any GA client event."""

CLIENT_EVENT_CLASSES: tuple[type[ClientEventBase], ...] = typing.get_args(typing.get_args(ClientEvent)[0])
CLIENT_EVENT_TYPES: frozenset[str] = frozenset(cls.model_fields["type"].default for cls in CLIENT_EVENT_CLASSES)
BETA_CLIENT_EVENT_TYPES: frozenset[str] = frozenset({"transcription_session.update"})
"""Client event types of the retired beta protocol that GA rejects."""


def function_call_output(call_id: str, output: Any) -> FunctionCallOutputItem:
    """The ``function_call_output`` item answering ``call_id``.

    A ``str`` is sent exactly as given; any other value (or pydantic model) is encoded to
    JSON once, so the wire never carries a JSON string inside a JSON string.
    """
    if isinstance(output, str):
        text = output
    elif isinstance(output, BaseModel):
        text = output.model_dump_json()
    else:
        try:
            text = json.dumps(output, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(
                f"output of call {call_id!r} is not JSON-serialisable ({type(output).__name__}): {exc}"
            ) from None
    return FunctionCallOutputItem(call_id=call_id, output=text)
