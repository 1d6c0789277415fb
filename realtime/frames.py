"""What the protocol core checks in a server frame before it trusts it, and how it reports one.

A frame can be well-formed JSON of a known type and still unusable: an audio delta that is
not base64 or not whole samples, an index far out of range. :func:`problem` says why, at a
cost bounded by the frame's size; the protocol core then reports the frame (shortened by
:func:`excerpt`) instead of handing it on.
"""

from __future__ import annotations

import base64
import json
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import events as ev
from .events.codec import json_text_bytes
from voxline.base.shown import clip

from .errors import LocalProtocolError, RemoteProtocolError

__all__ = ["MAX_INDEX", "DroppedFrame", "b64_len", "b64_pieces", "check_fits", "excerpt", "frame_bytes", "is_event", "problem", "short",
           "item_creates", "slim", "table", "text_pieces", "user_audio_creates"]

MAX_INDEX = 64  # highest output_index / content_index taken from the server (the service uses 0, 1, ...)


class DroppedFrame(str):
    """What a transport hands on in place of a message it dropped unread (a data channel message larger than this
    end takes): the reason, which the protocol core reports as a malformed event instead of parsing it."""


def problem(event: ev.ServerEvent, sample_width: int) -> str | None:
    """Why a well-typed event still cannot be used (None if it can); ``sample_width`` in bytes."""
    fields, extra = event.__dict__, event.__pydantic_extra__ or {}  # getattr's miss costs pydantic a slow path
    for name in ("output_index", "content_index"):
        index = fields.get(name, extra.get(name, 0))
        if isinstance(index, int) and not 0 <= index <= MAX_INDEX:
            return f"{event.type} with {name} {index} (expected 0 to {MAX_INDEX})"
    if isinstance(event, ev.ResponseOutputAudioDelta):
        try:
            size = len(event.audio)  # decoded once here; the session reads the same bytes
        except RemoteProtocolError as exc:
            return exc.message
        if size % sample_width:
            return f"audio delta of {size} bytes is not a whole number of {sample_width}-byte samples"
    return None


def frame_bytes(payload: Any, *, ascii_only: bool = False) -> int:
    """Bytes of ``payload`` as a compact JSON frame (``ascii_only``: non-ASCII characters escaped, as the GPT-Live
    core writes them; else raw UTF-8, as the Realtime core does)."""
    return len(json.dumps(payload, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8"))


def b64_pieces(data: bytes, room: int, width: int = 2) -> list[bytes]:
    """``data`` in order, in pieces of whole ``width``-byte samples whose base64 takes at most ``room`` bytes
    (none if not even one sample fits)."""
    per_piece = room // 4 * 3 // width * width
    if per_piece < width:
        return []
    return [data[start:start + per_piece] for start in range(0, len(data), per_piece)]


def text_pieces(text: str, room: int) -> list[str]:
    """``text`` in order, in pieces each of whose JSON string (without its quotes, other than ASCII as UTF-8, as
    :func:`frame_bytes` counts it) takes at most ``room`` bytes (none if not even one character fits).

    A piece ends after a space where one lies in its second half, and never inside a cluster of characters that
    belong together (a letter and its combining marks, a joined emoji, a skin tone, a flag) unless one cluster is
    longer than a piece: each piece reads as whole words, as it is a message of its own."""
    pieces: list[str] = []
    start = 0
    if room <= 0:
        return pieces
    while start < len(text):
        low, high = 0, min(len(text) - start, room)  # a character takes at least a byte
        while low < high:  # the most characters that fit (escapes and multi-byte characters take more than one)
            middle = (low + high + 1) // 2
            if json_text_bytes(text[start:start + middle]) - 2 <= room:  # without its quotes
                low = middle
            else:
                high = middle - 1
        n = low
        if not n:
            return []
        if start + n < len(text):
            n = _break(text, start, n)
        pieces.append(text[start:start + n])
        start += n
    return pieces


def _break(text: str, start: int, n: int) -> int:
    """How much of the ``n`` characters from ``start`` a piece takes so that it ends where a reader would break."""
    half = start + (n + 1) // 2
    for end in range(start + n, half, -1):  # after the last space of the second half
        if text[end - 1].isspace() and not _joined(text, end):
            return end - start
    for end in range(start + n, start, -1):  # else between two characters that do not belong together
        if not _joined(text, end):
            return end - start
    return n  # one cluster longer than a piece: torn where the room ends


def _joined(text: str, at: int) -> bool:
    """Do the characters either side of ``at`` belong together: a mark, a skin tone or an emoji tag on the one
    before it, a zero-width joiner between them, or two regional indicators (a flag)?"""
    after, before = text[at], text[at - 1]
    return (unicodedata.category(after) in _MARKS or _ZWJ in (after, before) or _SKIN_TONES <= after <= "\U0001f3ff"
            or _TAGS <= after <= "\U000e007f" or (_is_flag_letter(after) and _flag_letters_before(text, at) % 2 == 1))


def _is_flag_letter(char: str) -> bool:
    return _FLAG_LETTERS <= char <= "\U0001f1ff"


def _flag_letters_before(text: str, at: int) -> int:
    """Regional indicators in a row just before ``at`` (at most 65: an odd count means ``at`` is inside a flag;
    a longer run, which no text has, is taken as inside one)."""
    count = 0
    while count <= 64 and at - count > 0 and _is_flag_letter(text[at - count - 1]):
        count += 1
    return count if count <= 64 else 1


_MARKS = frozenset({"Mn", "Mc", "Me"})  # combining marks, variation selectors among them
_ZWJ = "\u200d"
_SKIN_TONES = "\U0001f3fb"  # to U+1F3FF
_TAGS = "\U000e0020"  # to U+E007F: a subdivision flag's letters and its end
_FLAG_LETTERS = "\U0001f1e6"  # regional indicators, to U+1F1FF: two make a flag


_USER_MESSAGE = {"type": "message", "role": "user"}


def item_creates(parts: Iterable[dict[str, Any]], ids: Iterator[str], *, item: Mapping[str, Any],
                 chained: bool = False, after: str | None = None) -> list[dict[str, Any]]:
    """Items in a row, one ``conversation.item.create`` payload for each content part in ``parts``.

    Each item has ``item``'s fields, the next id from ``ids`` and its part as its one content part. ``chained``:
    each names the item before it as its ``previous_item_id`` (the first names ``after``, None for the start of the
    conversation); else none names one, and they go at the end of the conversation in the order sent."""
    out: list[dict[str, Any]] = []
    previous = after
    for part in parts:
        item_id = next(ids)
        body = {**item, "id": item_id, "content": [part]}
        if chained:
            out.append({"type": "conversation.item.create", "previous_item_id": previous, "item": body})
            previous = item_id
        else:
            out.append({"type": "conversation.item.create", "item": body})
    return out


def user_audio_creates(data: bytes, room: int, ids: Iterator[str], *, item: Mapping[str, Any] = _USER_MESSAGE,
                       chained: bool = False, after: str | None = None) -> list[tuple[dict[str, Any], bytes]]:
    """PCM16 ``data`` as user audio items in a row (:func:`item_creates`): one for each piece of whole samples whose
    base64 takes at most ``room`` bytes (:func:`b64_pieces`), with that piece."""
    pieces = b64_pieces(data, room)
    parts = ({"type": "input_audio", "audio": base64.b64encode(piece).decode("ascii")} for piece in pieces)
    return list(zip(item_creates(parts, ids, item=item, chained=chained, after=after), pieces))


def check_fits(text: str, kind: object, limit: int) -> None:
    """Refuse a client event larger than its connection carries (one line, before it is queued)."""
    if len(text) * 4 > limit and (size := len(text.encode("utf-8"))) > limit:  # UTF-8 takes at most 4 bytes a character
        raise LocalProtocolError(f"{kind} is {size} bytes as JSON, and this connection carries at most {limit} "
                                 "bytes an event")


def is_event(text: str | bytes) -> bool:
    """Whether a frame is an event at all: a JSON object with a string ``type`` (bounded by its size;
    one nested too deep is not)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def b64_len(data: str) -> int:
    """Decoded length of a base64 string without decoding it."""
    n = len(data)
    if n == 0:
        return 0
    return n * 3 // 4 - (data[-2:].count("="))


def excerpt(text: str | bytes, limit: int = 200) -> str:
    """The start of a frame, for a report (a malformed frame may be megabytes long): redacted, then cut."""
    raw = text[:limit * 16].decode("utf-8", "replace") if isinstance(text, bytes) else text
    return clip(raw, limit + 1)


def slim(payload: dict[str, Any]) -> dict[str, Any]:
    """A command as remembered for error mapping: without the audio a rebuilt user turn carries."""
    item = payload.get("item")
    if not isinstance(item, dict) or not any(isinstance(p, dict) and "audio" in p for p in item.get("content") or ()):
        return payload
    content = [{k: v for k, v in p.items() if k != "audio"} if isinstance(p, dict) else p for p in item["content"]]
    return {**payload, "item": {**item, "content": content}}


def table(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a server may send any shape)."""
    return value if isinstance(value, dict) else {}


def short(value: object) -> str:
    """A value for a one-line report, at most about 40 characters."""
    return clip(repr(value), 41)  # redacted before it is cut: a cut secret is no longer recognisable
