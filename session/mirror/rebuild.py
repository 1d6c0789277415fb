"""Rebuild a conversation on a new connection, after a drop or the 60-minute cap (docs/protocol.md §4, §9, §11).

:func:`plan_rebuild` turns the mirror's items into ``conversation.item.create`` payloads
(GA shapes, no ``event_id``: the protocol core adds one) that recreate the conversation
in a fresh session, in order:

* the first goes after ``"root"``, each next one after the one before
  (``previous_item_id``), so the order holds even if the new server adds items meanwhile;
* every item keeps its old ``id`` (a client may set ``item.id`` on create; the server
  makes new ids only when it is left out), so outputs the CallTracker still has to send
  and later truncates refer to the same items;
* user and system messages become ``input_text`` (a user's audio becomes its transcript;
  images are kept when the server echoed their ``image_url``); a user's audio whose
  transcript never came is sent again as ``input_audio`` when the session still holds it
  (``audio_of``, the session's input journal), so a question asked just before a drop is
  not lost;
* assistant messages become ``output_text`` with the text the listener heard: all of it,
  or for a cut item the estimate of :attr:`MirrorItem.heard` (by the transcript deltas'
  arrival against the audio, else by the heard share of its duration);
* ``function_call`` items (``call_id``, ``name``, ``arguments``) are followed by their
  ``function_call_output`` whenever it exists; a call whose output does not exist yet is
  still recreated, so the output the CallTracker sends later has its call;
* left out: items a barge-in deleted, items of other kinds (MCP, …), messages with no
  text, and what the server had not finished: an assistant audio item still
  ``in_progress`` counts only with a known heard time, a function call only once its
  arguments were complete (or it has an output);
* sized for the new connection (``max_event_bytes``: a WebRTC data channel's messages are far
  smaller than a WebSocket's): a user's audio too large for one event goes as several user
  audio items, a message of one text part too large as several messages of the same role, its
  text in order (the first under the item's id, the rest under ids from ``new_id``), a tool output
  too large says so as its output (the call keeps an answer), and any other item too large is
  left out (``too_large``: a function call's arguments, a message of several parts; a call left
  out takes its output with it); the next item goes after the last one sent;
* the newest ``keep`` items only, when given (``SessionSettings.rebuild_items``): a conversation of
  days is tens of thousands of items, far past what a model's context holds, and every one a
  create to send; the older ones are counted (``older``), not listed. The window reaches back to
  the call of every tool output in it and to every item in ``hold`` (the calls whose outputs
  have not gone yet: an output sent later must find its call).
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from voxline.realtime.frames import frame_bytes, item_creates, text_pieces, user_audio_creates

from .records import MirrorItem, MirrorPart

__all__ = ["Rebuild", "SkipReason", "Skipped", "plan_rebuild"]

AudioLookup = Callable[[str], bytes | None]  # item id → the user's PCM audio of it, if still held
SkipReason = Literal["deleted_by_barge_in", "unfinished", "nothing_heard", "empty", "orphan_output", "unsupported",
                     "too_large"]
SPARE_BYTES = 256  # what the protocol core adds to a command on its way out (its event_id), and room to spare


@dataclass(frozen=True, slots=True)
class Skipped:
    """An item a rebuild leaves out, and why."""

    item_id: str
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class Rebuild:
    """The ``conversation.item.create`` payloads of a rebuild, the ids they create, and what was left out."""

    commands: tuple[dict[str, Any], ...]
    item_ids: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    split_texts: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()
    """Messages sent as several: each one's id and the commands that carry its text (the first under its id)."""
    older: int = 0
    """The oldest items left out, before the window (the newest ``keep``, reaching back to the calls it needs): the
    first ``older`` of the items planned from."""


def _answered_calls(items: Sequence[MirrorItem], excluded: frozenset[str]) -> set[str]:
    """``call_id`` of calls that have an output after them."""
    seen: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item.id in excluded or item.call_id is None:
            continue
        if item.kind == "function_call":
            seen.add(item.call_id)
        elif item.kind == "function_call_output" and item.call_id in seen:
            answered.add(item.call_id)
    return answered


def _input_part(part: MirrorPart) -> dict[str, Any] | None:
    """A user/system content part as the new session gets it; ``None`` if nothing of it survives."""
    if part.type == "input_image":
        if part.image_url is None:
            return None
        image: dict[str, Any] = {"type": "input_image", "image_url": part.image_url}
        return image | ({"detail": part.detail} if part.detail else {})
    return {"type": "input_text", "text": part.text} if part.text else None


def _user_audio(item: MirrorItem, audio_of: AudioLookup | None) -> dict[str, Any] | None:
    """The user's own audio of an item with no transcript, as an ``input_audio`` part."""
    if audio_of is None or item.role != "user" or item.text or not item.has_audio:
        return None
    audio = audio_of(item.id)
    return {"type": "input_audio", "audio": base64.b64encode(audio).decode("ascii")} if audio else None


def _message(item: MirrorItem, audio_of: AudioLookup | None = None) -> dict[str, Any] | SkipReason:
    if item.role in ("user", "system"):
        content = [p for p in map(_input_part, item.parts) if p is not None]
        spoken = _user_audio(item, audio_of)
        if spoken is not None:
            content.append(spoken)
        if item.role == "system":
            content = [p for p in content if p["type"] == "input_text"]
        if not content:
            return "empty"
    elif item.role == "assistant":
        if item.has_audio and item.status == "in_progress" and item.listened_ms is None:
            return "unfinished"
        text = item.heard_text
        if not text:
            return "nothing_heard" if item.listened_ms is not None else "empty"
        content = [{"type": "output_text", "text": text}]
    else:
        return "unsupported"
    return {"id": item.id, "type": "message", "role": item.role, "content": content}


def _function_call(item: MirrorItem, answered: set[str]) -> dict[str, Any] | SkipReason:
    if item.call_id is None or item.name is None:
        return "unsupported"
    if not (item.arguments_done or item.status == "completed" or item.call_id in answered):
        return "unfinished"
    return {"id": item.id, "type": "function_call", "call_id": item.call_id, "name": item.name,
            "arguments": item.arguments}


def _function_call_output(item: MirrorItem, emitted_calls: set[str]) -> dict[str, Any] | SkipReason:
    if item.call_id is None or item.call_id not in emitted_calls or item.output is None:
        return "orphan_output"
    return {"id": item.id, "type": "function_call_output", "call_id": item.call_id, "output": item.output}


def _body(item: MirrorItem, answered: set[str], emitted_calls: set[str],
          audio_of: AudioLookup | None) -> dict[str, Any] | SkipReason:
    match item.kind:
        case "message":
            return _message(item, audio_of)
        case "function_call":
            return _function_call(item, answered)
        case "function_call_output":
            return _function_call_output(item, emitted_calls)
        case "other":
            return "unsupported"
        case _:
            assert_never(item.kind)


def _size(command: dict[str, Any]) -> int:
    return frame_bytes(command) + SPARE_BYTES


def _room(command: dict[str, Any], limit: int, second_id: str, empty_part: dict[str, Any]) -> int:
    """Bytes left for one piece's content in an event of at most ``limit``: the first piece's envelope (the item's id,
    after the item it follows) or a later one's (a new id, after a piece), whichever is larger, so that each piece
    also fits as an item of its own in a later rebuild."""
    item = command["item"]
    first = {**command, "item": {**item, "content": [empty_part]}}
    before = max(item["id"], second_id, key=len)
    later = {**command, "previous_item_id": before, "item": {**item, "id": second_id, "content": [empty_part]}}
    return limit - max(_size(first), _size(later))


def _audio_parts(command: dict[str, Any], limit: int, new_id: Callable[[], str] | None) -> list[dict[str, Any]] | None:
    """A user audio item too large for one event as several in a row, each small enough; None if it is not one."""
    item = command["item"]
    content = item.get("content") or []
    if (new_id is None or item.get("type") != "message" or item.get("role") != "user" or len(content) != 1
            or content[0].get("type") != "input_audio"):
        return None
    second = new_id()
    room = _room(command, limit, second, {"type": "input_audio", "audio": ""})
    ids = _piece_ids(item, second, new_id)
    out = user_audio_creates(base64.b64decode(content[0]["audio"]), room, ids, item=_fields(item), chained=True,
                             after=command["previous_item_id"])
    return [payload for payload, _piece in out] or None


def _text_parts(command: dict[str, Any], limit: int, new_id: Callable[[], str] | None) -> list[dict[str, Any]] | None:
    """A message of one text part too large for one event as several messages of the same role in a row, the text
    in order, each small enough; None if it is not one."""
    item = command["item"]
    content = item.get("content") or []
    if new_id is None or item.get("type") != "message" or len(content) != 1:
        return None
    kind = content[0].get("type")
    if kind not in ("input_text", "output_text"):
        return None
    second = new_id()
    pieces = text_pieces(content[0]["text"], _room(command, limit, second, {"type": kind, "text": ""}))
    if not pieces:
        return None
    ids = _piece_ids(item, second, new_id)
    return item_creates(({"type": kind, "text": piece} for piece in pieces), ids, item=_fields(item), chained=True,
                        after=command["previous_item_id"])


def _piece_ids(item: dict[str, Any], second: str, new_id: Callable[[], str]) -> Iterator[str]:
    """The ids of an item's pieces: the first keeps the item's, the second is ``second`` (drawn to size the room),
    the rest new."""
    return itertools.chain((item["id"], second), iter(new_id, None))


def _fields(item: dict[str, Any]) -> dict[str, Any]:
    """An item's fields but its id and content, which each piece has of its own."""
    return {k: v for k, v in item.items() if k not in ("id", "content")}


def _output_note(command: dict[str, Any], size: int, limit: int) -> list[dict[str, Any]] | None:
    """A tool output too large for the new connection, said so as its output: the call keeps an answer."""
    item = command["item"]
    if item.get("type") != "function_call_output":
        return None
    note = json.dumps({"error": f"the tool's output ({size} bytes as sent) was too large to carry over to this "
                                f"connection (at most {limit} bytes an event)"})
    noted = {**command, "item": {**item, "output": note}}
    return [noted] if _size(noted) <= limit else None


def _window_start(items: Sequence[MirrorItem], keep: int, hold: frozenset[str]) -> int:
    """Where the newest ``keep`` items begin, moved back to any item in ``hold`` and to the call of any output the
    window holds (an item brought in brings its own outputs' calls too): one walk from the end."""
    start = max(0, len(items) - keep)
    needed = {item.call_id for item in items[start:] if item.kind == "function_call_output"}
    for at in range(start - 1, -1, -1):
        item = items[at]
        if item.id in hold or (item.kind == "function_call" and item.call_id in needed):
            needed.update(i.call_id for i in items[at:start] if i.kind == "function_call_output")
            start = at
    return start


def plan_rebuild(items: Sequence[MirrorItem], pending_deletes: frozenset[str] = frozenset(),
                 audio_of: AudioLookup | None = None, *, max_event_bytes: int | None = None,
                 new_id: Callable[[], str] | None = None, keep: int | None = None,
                 hold: frozenset[str] = frozenset()) -> Rebuild:
    """The rebuild of ``items`` (in server order); ``pending_deletes`` are ids a barge-in deleted (see the module
    docstring for ``max_event_bytes``, ``new_id``, ``keep`` and ``hold``)."""
    older = _window_start(items, keep, hold) if keep is not None else 0
    items = items[older:]
    answered = _answered_calls(items, pending_deletes)
    emitted_calls: set[str] = set()
    commands: list[dict[str, Any]] = []
    ids: list[str] = []
    skipped: list[Skipped] = []
    split_texts: list[tuple[str, tuple[dict[str, Any], ...]]] = []
    previous = "root"
    for item in items:
        body: dict[str, Any] | SkipReason = (
            "deleted_by_barge_in" if item.id in pending_deletes else _body(item, answered, emitted_calls, audio_of)
        )
        if isinstance(body, str):
            skipped.append(Skipped(item.id, body))
            continue
        command: dict[str, Any] = {"type": "conversation.item.create", "previous_item_id": previous, "item": body}
        sent = [command]
        if max_event_bytes is not None and (size := _size(command)) > max_event_bytes:
            texts = _text_parts(command, max_event_bytes, new_id)
            if texts is not None:
                split_texts.append((item.id, tuple(texts)))
            parts = (_audio_parts(command, max_event_bytes, new_id) or texts
                     or _output_note(command, size, max_event_bytes))
            if parts is None:
                skipped.append(Skipped(item.id, "too_large"))
                continue
            sent = parts
        if item.kind == "function_call" and item.call_id is not None:
            emitted_calls.add(item.call_id)
        commands.extend(sent)
        ids.append(item.id)
        previous = sent[-1]["item"]["id"]
    return Rebuild(tuple(commands), tuple(ids), tuple(skipped), tuple(split_texts), older)
