"""Token usage for ``response.done`` and ``rate_limits.updated`` — estimates, not billing.

The local server runs no model, so counts are derived from lengths:

- text: one token per 4 characters (rounded up);
- input audio: 10 tokens per second; output audio: 20 tokens per second;
- speech not voiced yet (to fit ``max_output_tokens``): 70 ms per character, about the
  pace of both built-in voices;
- input = instructions + tools (as JSON) + every conversation item before the response;
- nothing is cached (``cached_tokens`` = 0).

``rate_limits.updated`` reports one ``tokens`` limit of 15,000,000 that decreases
by each response's total.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from voxline.realtime.server.engine.conversation import Entry

__all__ = ["RateLimits", "audio_tokens", "input_usage", "speech_seconds", "text_tokens", "usage_object"]

INPUT_AUDIO_TOKENS_PER_S = 10
OUTPUT_AUDIO_TOKENS_PER_S = 20
TOKEN_LIMIT = 15_000_000
SPEECH_MS_PER_CHARACTER = 70


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def speech_seconds(text: str) -> float:
    """How long ``text`` takes to say, estimated from its length."""
    return len(text) * SPEECH_MS_PER_CHARACTER / 1000.0


def audio_tokens(seconds: float, *, output: bool) -> int:
    rate = OUTPUT_AUDIO_TOKENS_PER_S if output else INPUT_AUDIO_TOKENS_PER_S
    return math.ceil(max(0.0, seconds) * rate)


def input_usage(instructions: str, tools_tokens: int, items: Iterable[Entry]) -> tuple[int, int]:
    """(text tokens, audio tokens) of what a response would read (the session's tools counted once a change,
    :attr:`~voxline.realtime.server.engine.session_config.SessionConfig.tools_tokens`)."""
    text = text_tokens(instructions) + tools_tokens
    audio = 0
    for entry in items:
        item = entry.item
        for key in ("arguments", "output"):
            if isinstance(item.get(key), str):
                text += text_tokens(item[key])
        for index, part in enumerate(item.get("content") or []):
            for key in ("text", "transcript"):
                if isinstance(part.get(key), str):
                    text += text_tokens(part[key])
            if index in entry.sizes:
                audio += audio_tokens(entry.audio_ms(index) / 1000.0, output=item.get("role") == "assistant")
    return text, audio


def usage_object(input_text: int, input_audio: int, output_text: int, output_audio: int) -> dict[str, Any]:
    """The ``usage`` of a ``response.done``."""
    total_in = input_text + input_audio
    total_out = output_text + output_audio
    return {
        "total_tokens": total_in + total_out,
        "input_tokens": total_in,
        "output_tokens": total_out,
        "input_token_details": {
            "text_tokens": input_text,
            "audio_tokens": input_audio,
            "image_tokens": 0,
            "cached_tokens": 0,
            "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": output_text, "audio_tokens": output_audio},
    }


class RateLimits:
    """The ``tokens`` rate limit one session reports after each response."""

    def __init__(self, limit: int = TOKEN_LIMIT) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, tokens: int) -> list[dict[str, Any]]:
        """Record a response's tokens; return the ``rate_limits`` list to send."""
        self.used += tokens
        remaining = max(0, self.limit - self.used)
        return [{"name": "tokens", "limit": self.limit, "remaining": remaining, "reset_seconds": 0.001}]
