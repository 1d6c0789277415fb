"""The local server's session config and response parameters: an update costs what the update holds, not
what the session holds, and ``metadata`` is held to its documented limits.

A session holding megabytes of tools took seconds for each later one-field ``session.update`` (the
whole config deep-copied, twice) and for each ``response.create`` (the tools copied, then encoded
as JSON to count their tokens), and every other session on that server waited meanwhile.
"""

from __future__ import annotations

import json
import math

import pytest

from voxline.realtime.server.engine.session_config import SessionConfig
from tests.support.engine_harness import Harness

TOOLS = [{"type": "function", "name": f"tool_{k}", "description": "d" * 40,
          "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}} for k in range(200)]


def test_a_small_update_shares_what_it_does_not_change() -> None:
    config = SessionConfig("gpt-realtime")
    config.update({"type": "realtime", "tools": TOOLS}, voice_locked=False)
    stored = config.view()["tools"]
    assert stored == TOOLS and stored is not TOOLS  # the update's own value is copied: the event's is not kept
    config.update({"type": "realtime", "instructions": "Be brief."}, voice_locked=False)
    config.update({"type": "realtime", "audio": {"output": {"speed": 1.2}}}, voice_locked=False)
    after = config.view()
    assert after["tools"] is stored  # not copied again: the update's cost is its own size
    assert after["instructions"] == "Be brief." and after["audio"]["output"]["speed"] == 1.2


def test_a_view_changed_by_its_reader_leaves_the_session_as_it_was() -> None:
    config = SessionConfig("gpt-realtime")
    view = config.view({"id": "sess_1"})
    view["instructions"] = "changed"
    view["audio"]["output"]["voice"] = "changed"
    view["audio"]["input"]["format"] = "changed"
    again = config.view()
    assert again["instructions"] != "changed" and "id" not in again
    assert again["audio"]["output"]["voice"] == "alloy" and again["audio"]["input"]["format"] != "changed"


def test_a_responses_input_tokens_count_the_tools_as_json() -> None:
    def input_tokens(tools: list[dict[str, object]] | None) -> int:
        h = Harness()
        if tools is not None:
            h.send({"type": "session.update", "session": {"type": "realtime", "tools": tools}})
        done = [e for e in h.send({"type": "response.create"}) if e["type"] == "response.done"]
        return int(done[0]["response"]["usage"]["input_tokens"])

    assert input_tokens(TOOLS) - input_tokens(None) == math.ceil(len(json.dumps(TOOLS)) / 4)
    assert input_tokens([]) == input_tokens(None)


@pytest.mark.parametrize(("metadata", "param", "said"), [
    ({f"k{i}": "v" for i in range(17)}, "response.metadata", "at most 16 key-value pairs, not 17"),
    ({"k" * 65: "v"}, "response.metadata", "a key of at most 64 characters, not 65"),
    ({"k": "v" * 513}, "response.metadata.k", "a value of at most 512 characters, not 513"),
])
def test_response_metadata_is_held_to_the_documented_limits(metadata: dict[str, str], param: str, said: str) -> None:
    """17 pairs, a 65-character key and a 513-character value were taken and echoed in response.done (900,000
    keys too: 29 MB of output); the SDK documents 16 pairs, keys of 64 characters and values of 512."""
    h = Harness()
    [error] = h.send({"type": "response.create", "response": {"metadata": metadata}})
    assert (error["error"]["code"], error["error"]["param"]) == ("invalid_value", param)
    assert said in error["error"]["message"]
    fits = {f"k{i}": "v" * 512 for i in range(16)}
    created = h.send({"type": "response.create", "response": {"metadata": fits}})[0]
    assert created["type"] == "response.created" and created["response"]["metadata"] == fits


def test_a_huge_prefix_padding_keeps_an_idle_buffer_bounded() -> None:
    """A padding of 10**15 ms kept every appended second of silence: a session streaming silence had its appends
    refused once the buffer held 15 MiB (about five and a half minutes)."""
    from voxline.realtime.server.engine.input_audio import InputAudio

    audio = InputAudio(turn_detection={"type": "server_vad", "prefix_padding_ms": 10**15})
    second = bytes(2 * 24_000)
    for _ in range(200):
        audio.append(second)
    assert audio.buffered_ms <= 70_000 + 1000  # a minute of padding and ten seconds of silence, plus this append
    assert audio.position == 200 * 24_000
