"""The in-process engine of a replay keeps how much audio each item holds, not its bytes: truncation and
token counts come out as with the bytes kept, and memory does not grow with the call."""

from __future__ import annotations

import base64
import random

import pytest

from voxline.realtime.server.engine.conversation import Conversation, Entry
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.usage import input_usage

SECOND = 48_000  # bytes of 24 kHz PCM16


def reply(item_id: str) -> Entry:
    return Entry({"id": item_id, "type": "message", "role": "assistant",
                  "content": [{"type": "output_audio", "transcript": "hello there"}]})


@pytest.mark.parametrize("keep", [True, False])
def test_truncation_and_tokens_need_only_the_length(keep: bool) -> None:
    conversation = Conversation(keep_audio=keep)
    user = Entry({"id": "u1", "type": "message", "role": "user", "content": [{"type": "input_audio"}]},
                 {0: [bytes(2 * SECOND)]})
    conversation.insert(user)
    entry = reply("a1")
    conversation.insert(entry)
    for _ in range(3):
        entry.add_audio(0, bytes(SECOND))
    assert entry.audio_ms(0) == 3000 and user.audio_ms(0) == 2000
    assert bool(entry.audio) is keep and bool(user.audio) is keep  # the bytes only where they are kept
    tokens = input_usage("", 0, conversation)
    with pytest.raises(RequestRejected, match="3000"):
        conversation.truncate("a1", 0, 3500)  # past the audio: refused with the length it has
    conversation.truncate("a1", 0, 1250)
    assert entry.audio_ms(0) == 1250
    assert len(entry.kept_audio(0)) == (60_000 if keep else 0)
    retrieved = conversation.retrieve("a1")["content"][0]
    assert ("audio" in retrieved) is keep
    after = input_usage("", 0, conversation)
    assert after[1] < tokens[1]


def test_both_ways_count_the_same_tokens() -> None:
    counts = []
    for keep in (True, False):
        conversation = Conversation(keep_audio=keep)
        entry = reply("a1")
        conversation.insert(entry)
        entry.add_audio(0, bytes(5 * SECOND))
        conversation.truncate("a1", 0, 2100)
        counts.append(input_usage("", 0, conversation))
    assert counts[0] == counts[1]


def test_a_cut_keeps_exactly_the_bytes_before_it_whatever_the_chunks() -> None:
    """Audio is kept in the chunks it came in; a truncate anywhere (on a chunk's edge or inside
    one) leaves what a retrieve returns equal to the whole audio cut at that point."""
    rng = random.Random(7)
    for _ in range(300):
        conversation = Conversation()
        entry = reply("a1")
        conversation.insert(entry)
        whole = b""
        for _ in range(rng.randint(1, 8)):
            chunk = rng.randbytes(2 * rng.choice([0, 1, 24, 240, 2400]))
            entry.add_audio(0, chunk)
            whole += chunk
        if not whole:
            continue
        end_ms = rng.choice([0, len(whole) // 48, rng.randint(0, len(whole) // 48)])
        conversation.truncate("a1", 0, end_ms)
        keep = end_ms * 48
        audio = base64.b64decode(conversation.retrieve("a1")["content"][0]["audio"])
        assert audio == whole[:keep] and entry.audio_ms(0) == end_ms
