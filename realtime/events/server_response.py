"""GA ``response.*`` server events (docs/protocol.md §5): lifecycle, items, parts, deltas, tool calls."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, overload

from pydantic import Field

from .b64 import decode_audio
from .common import ContentPart, Item, Response, decode_arguments
from .server import ServerEventBase

__all__ = [
    "ResponseContentPartAdded",
    "ResponseContentPartDone",
    "ResponseCreated",
    "ResponseDone",
    "ResponseFunctionCallArgumentsDelta",
    "ResponseFunctionCallArgumentsDone",
    "ResponseOutputAudioDelta",
    "ResponseOutputAudioDone",
    "ResponseOutputAudioTranscriptDelta",
    "ResponseOutputAudioTranscriptDone",
    "ResponseOutputItemAdded",
    "ResponseOutputItemDone",
    "ResponseOutputTextDelta",
    "ResponseOutputTextDone",
]


class _DecodedAudio:
    """A cached property: ``delta`` decoded on first access, decoded again only if ``delta`` changed."""

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _DecodedAudio: ...
    @overload
    def __get__(self, obj: ResponseOutputAudioDelta, owner: type | None = None) -> bytes: ...
    def __get__(self, obj: ResponseOutputAudioDelta | None, owner: type | None = None) -> bytes | _DecodedAudio:
        if obj is None:
            return self
        delta = obj.delta
        cached: tuple[str, bytes] | None = obj.__dict__.get(_CACHE)
        if cached is not None and cached[0] is delta:
            return cached[1]
        audio = decode_audio(delta)
        obj.__dict__[_CACHE] = (delta, audio)
        return audio


_CACHE = "_decoded_audio"


class _ResponseRef(ServerEventBase):
    """``response_id`` + ``output_index``: where a response event points."""

    response_id: str
    output_index: int


class _PartRef(_ResponseRef):
    """A response event about one content part of one item."""

    item_id: str
    content_index: int


class ResponseCreated(ServerEventBase):
    """``response.created``: a response started (``status`` ``in_progress``)."""

    type: Literal["response.created"] = "response.created"
    response: Response


class ResponseDone(ServerEventBase):
    """``response.done``: a response ended (completed, cancelled, incomplete or failed)."""

    type: Literal["response.done"] = "response.done"
    response: Response


class ResponseOutputItemAdded(_ResponseRef):
    """``response.output_item.added``: the model started an output item."""

    type: Literal["response.output_item.added"] = "response.output_item.added"
    item: Item


class ResponseOutputItemDone(_ResponseRef):
    """``response.output_item.done``: an output item is complete."""

    type: Literal["response.output_item.done"] = "response.output_item.done"
    item: Item


class ResponseContentPartAdded(_PartRef):
    """``response.content_part.added``."""

    type: Literal["response.content_part.added"] = "response.content_part.added"
    part: ContentPart


class ResponseContentPartDone(_PartRef):
    """``response.content_part.done``."""

    type: Literal["response.content_part.done"] = "response.content_part.done"
    part: ContentPart


class ResponseOutputAudioDelta(_PartRef):
    """``response.output_audio.delta``: ``delta`` is base64 as on the wire; ``audio`` the bytes."""

    type: Literal["response.output_audio.delta"] = "response.output_audio.delta"
    delta: str = Field(repr=False)

    audio: ClassVar[_DecodedAudio] = _DecodedAudio()


class ResponseOutputAudioDone(_PartRef):
    """``response.output_audio.done``: no more audio for this part."""

    type: Literal["response.output_audio.done"] = "response.output_audio.done"


class ResponseOutputAudioTranscriptDelta(_PartRef):
    """``response.output_audio_transcript.delta``: text of the audio being generated."""

    type: Literal["response.output_audio_transcript.delta"] = "response.output_audio_transcript.delta"
    delta: str


class ResponseOutputAudioTranscriptDone(_PartRef):
    """``response.output_audio_transcript.done``."""

    type: Literal["response.output_audio_transcript.done"] = "response.output_audio_transcript.done"
    transcript: str


class ResponseOutputTextDelta(_PartRef):
    """``response.output_text.delta`` (text-only output)."""

    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    delta: str


class ResponseOutputTextDone(_PartRef):
    """``response.output_text.done``."""

    type: Literal["response.output_text.done"] = "response.output_text.done"
    text: str


class ResponseFunctionCallArgumentsDelta(_ResponseRef):
    """``response.function_call_arguments.delta``: partial arguments; never run a tool on these."""

    type: Literal["response.function_call_arguments.delta"] = "response.function_call_arguments.delta"
    item_id: str
    call_id: str
    delta: str


class ResponseFunctionCallArgumentsDone(_ResponseRef):
    """``response.function_call_arguments.done``: the complete call, ready to run."""

    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    call_id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        """The arguments decoded once; :class:`RemoteProtocolError` if they are not JSON."""
        return decode_arguments(self.arguments, name=self.name, call_id=self.call_id)
