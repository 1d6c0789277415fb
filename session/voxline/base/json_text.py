"""Text a JSON peer sent: half a character made whole.

JSON may escape a lone surrogate (``"\\ud83d"`` without its pair: half of an emoji, say, where a
peer split its text between two frames). Python's ``json`` decodes it into a string that UTF-8
cannot encode, so it could never be written to a log or sent back to a peer (a restored session
repeats what was said). :func:`whole_characters` puts U+FFFD in its place; :func:`escapes_surrogate`
says cheaply, from the raw frame, whether a decoded frame may need it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["escapes_surrogate", "whole_characters"]

_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(_ESCAPED_SURROGATE.pattern.encode())


def escapes_surrogate(text: str | bytes) -> bool:
    """True if raw JSON ``text`` escapes a surrogate (paired or not): only then can its decoded strings hold one
    alone. (An unescaped lone surrogate cannot reach here: it is not valid UTF-8, nor a ``str`` read from it.)"""
    if isinstance(text, str):
        return _ESCAPED_SURROGATE.search(text) is not None
    return _ESCAPED_SURROGATE_BYTES.search(text) is not None


def whole_characters(value: Any) -> Any:
    """``value`` (decoded JSON) with each lone surrogate in its strings, keys included, replaced by U+FFFD.

    Raises RecursionError for a value nested deeper than this walk may go."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {whole_characters(k): whole_characters(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_characters(v) for v in value]
    return value
