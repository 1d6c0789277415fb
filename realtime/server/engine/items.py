"""Conversation items sent by the client (``conversation.item.create``, ``response.create.input``).

Validates a GA item (message by role, ``function_call``, ``function_call_output``)
and splits it into the public item (``object: "realtime.item"``, no audio bytes)
and the decoded audio of its ``input_audio`` parts. Assistant audio cannot be
created by a client.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from voxline.realtime.events.b64 import decode_strict
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.nulls import value_without_nulls, without_nulls
from voxline.realtime.server.engine.validate import Field, check_object, check_value

__all__ = ["ITEM", "NewItem", "decode_base64", "parse_item"]

_STR = Field(("string",))
_REQ_STR = Field(("string",), required=True)
_STATUS = Field(("string",), choices=("completed", "incomplete", "in_progress"))
_COMMON = {"id": _STR, "object": Field(("string",), choices=("realtime.item",)), "status": _STATUS}

_CONTENT_BY_ROLE = {
    "system": {"input_text": {"type": _STR, "text": _STR}},
    "user": {
        "input_text": {"type": _STR, "text": _STR},
        "input_audio": {"type": _STR, "audio": _STR, "transcript": Field(("string", "null"))},
        "input_image": {"type": _STR, "image_url": _STR, "detail": Field(("string",), choices=("auto", "low", "high"))},
    },
    "assistant": {
        "output_text": {"type": _STR, "text": _STR},
        "output_audio": {"type": _STR, "audio": _STR, "transcript": Field(("string", "null"))},
    },
}

ITEM = Field(
    ("object",),
    variants=(
        "type",
        {
            "message": {
                **_COMMON,
                "type": _STR,
                "role": Field(("string",), required=True, choices=("system", "user", "assistant")),
                "content": Field(("array",), required=True, items=Field(("object",))),
            },
            "function_call": {**_COMMON, "type": _STR, "call_id": _STR, "name": _REQ_STR, "arguments": _REQ_STR},
            "function_call_output": {**_COMMON, "type": _STR, "call_id": _REQ_STR, "output": _REQ_STR},
        },
    ),
)


@dataclass
class NewItem:
    """A validated client item: its public form and the audio bytes of each content part."""

    item: dict[str, Any]
    audio: dict[int, bytes] = field(default_factory=dict)


def decode_base64(text: str, path: str) -> bytes:
    """Strict base64 decoding; an ``invalid_value`` error names ``path``."""
    try:
        return decode_strict(text)
    except ValueError:  # binascii.Error is one
        message = f"Invalid '{path}'. Expected base64-encoded audio bytes."
        raise RequestRejected(errors.invalid_value(path, message)) from None


def parse_item(raw: Any, path: str, new_id: str) -> NewItem:
    """Validate ``raw`` as a client item at ``path``; ``new_id`` is used when it has no id."""
    raw = value_without_nulls(raw, ITEM)
    check_value(raw, ITEM, path)
    item = copy.deepcopy(raw)
    item.setdefault("id", new_id)
    item["object"] = "realtime.item"
    item["status"] = "completed"
    audio: dict[int, bytes] = {}
    if item["type"] == "message":
        audio = _parse_content(item, path)
    elif item["type"] == "function_call":
        item.setdefault("call_id", item["id"])
    return NewItem(item=_ordered(item), audio=audio)


def _parse_content(item: dict[str, Any], path: str) -> dict[int, bytes]:
    allowed = _CONTENT_BY_ROLE[item["role"]]
    audio: dict[int, bytes] = {}
    for index, part in enumerate(item["content"]):
        where = f"{path}.content[{index}]"
        if not isinstance(part, dict):
            raise RequestRejected(errors.invalid_type(where, "an object", "a value of another type"))
        part_type = part.get("type")
        if not isinstance(part_type, str) or part_type not in allowed:
            if "type" not in part:
                raise RequestRejected(errors.missing_parameter(f"{where}.type"))
            raise RequestRejected(errors.invalid_choice(f"{where}.type", part_type, tuple(allowed)))
        part = item["content"][index] = without_nulls(part, allowed[part_type])
        check_object(part, allowed[part_type], where)
        if part_type == "output_audio":
            message = "Assistant audio cannot be created by a client; use output_text."
            raise RequestRejected(errors.invalid_value(f"{where}.type", message))
        if part_type == "input_audio":
            audio[index] = decode_base64(part.pop("audio", ""), f"{where}.audio")
            part.setdefault("transcript", None)
    return audio


def _ordered(item: dict[str, Any]) -> dict[str, Any]:
    head: dict[str, Any] = {k: item[k] for k in ("id", "type", "object", "status") if k in item}
    return {**head, **{k: v for k, v in item.items() if k not in head}}
