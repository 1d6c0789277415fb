"""Server events as JSON text, with cached base64 audio spliced in rather than scanned again.

``json.dumps`` escapes a string character by character; a 100 ms audio delta is 6,400
characters of base64, none of which ever needs escaping, and the server sends the same cached
chunk to every session that streams the same reply. :class:`Base64Text` marks such text, and
:func:`encode_event` writes it between quotes as it is. The result is the text ``json.dumps``
gives for the same event, character for character.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Base64Text", "encode_event"]


class Base64Text(str):
    """Text made by a base64 encoder: letters, digits, ``+``, ``/`` and ``=`` only."""

    __slots__ = ()


def encode_event(event: dict[str, Any]) -> str:
    """``json.dumps(event)``, with a last ``delta`` that is :class:`Base64Text` copied rather than escaped."""
    delta = event.get("delta")
    if type(delta) is Base64Text and next(reversed(event)) == "delta":
        head = json.dumps({key: value for key, value in event.items() if key != "delta"})
        return f'{head[:-1]}, "delta": "{delta}"}}' if len(head) > 2 else f'{{"delta": "{delta}"}}'
    return json.dumps(event)
