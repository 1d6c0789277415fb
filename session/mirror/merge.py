"""From wire items (``voxline.realtime.events`` ``Item``) to mirror records, and updates of a record.

Used for ``conversation.item.added``/``.done``/``.retrieved`` and the items of
``response.output_item.done``/``response.done``. The service's copy of an item wins for
status, names and arguments; its text wins only when it has some, so a transcript the
service dropped (a truncated item, docs/protocol.md §8) or has not sent yet never erases
the text the mirror received. A cut item's text is not changed at all.
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

from voxline.realtime import events as ev

from .records import MirrorItem, MirrorPart

__all__ = ["item_id_of", "merge_item", "new_record"]


def item_id_of(item: ev.Item) -> str | None:
    """The item's ``id`` (unknown items keep it among their extra keys)."""
    if isinstance(item, ev.UnknownItem):
        value = (item.model_extra or {}).get("id")
        return value if isinstance(value, str) else None
    return item.id


def _status_of(item: ev.Item) -> str | None:
    if isinstance(item, ev.UnknownItem):
        value = (item.model_extra or {}).get("status")
        return value if isinstance(value, str) else None
    return item.status


def _part(part: ev.ContentPart) -> MirrorPart:
    extra = part.model_extra or {}
    text = part.text if part.text is not None else (part.transcript or "")
    image_url = extra.get("image_url")
    detail = extra.get("detail")
    return MirrorPart(
        type=part.type,
        text=text,
        image_url=image_url if isinstance(image_url, str) else None,
        detail=detail if isinstance(detail, str) else None,
    )


def _merge_parts(old: tuple[MirrorPart, ...], new: list[ev.ContentPart]) -> tuple[MirrorPart, ...]:
    merged = list(old)
    for index, wire in enumerate(new):
        incoming = _part(wire)
        if index >= len(merged):
            merged.append(incoming)
            continue
        mine = merged[index]
        merged[index] = MirrorPart(
            type=mine.type or incoming.type,
            text=incoming.text or mine.text,
            image_url=incoming.image_url or mine.image_url,
            detail=incoming.detail or mine.detail,
        )
    return tuple(merged)


def new_record(item: ev.Item, item_id: str) -> MirrorItem:
    """A fresh record of ``item``."""
    status = _status_of(item)
    match item:
        case ev.MessageItem():
            parts = tuple(_part(p) for p in item.content)
            return MirrorItem(item_id, "message", "message", role=item.role, status=status, parts=parts)
        case ev.FunctionCallItem():
            return MirrorItem(
                item_id, "function_call", "function_call", status=status,
                call_id=item.call_id, name=item.name, arguments=item.arguments,
            )
        case ev.FunctionCallOutputItem():
            return MirrorItem(
                item_id, "function_call_output", "function_call_output", status=status,
                call_id=item.call_id, output=item.output,
            )
        case ev.UnknownItem():
            return MirrorItem(item_id, "other", item.type, status=status)
        case _:
            assert_never(item)


def merge_item(old: MirrorItem, item: ev.Item) -> MirrorItem:
    """``old`` updated with the service's copy ``item`` of the same id."""
    status = _status_of(item) or old.status
    match item:
        case ev.MessageItem() if old.kind == "message":
            parts = old.parts if old.frozen else _merge_parts(old.parts, item.content)
            return dataclasses.replace(old, role=item.role or old.role, status=status, parts=parts)
        case ev.FunctionCallItem() if old.kind == "function_call":
            arguments = old.arguments if old.arguments_done or not item.arguments else item.arguments
            return dataclasses.replace(
                old, status=status, call_id=item.call_id or old.call_id, name=item.name or old.name,
                arguments=arguments,
            )
        case ev.FunctionCallOutputItem() if old.kind == "function_call_output":
            return dataclasses.replace(old, status=status, call_id=item.call_id, output=item.output)
        case ev.UnknownItem() if old.kind == "other":
            return dataclasses.replace(old, status=status, item_type=item.type)
        case _:  # the same id now names another kind of item: take the new one whole
            return dataclasses.replace(new_record(item, old.id), response_id=old.response_id)
