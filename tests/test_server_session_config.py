"""The local server's session config: an update costs what the update holds, not what the session holds.

A session holding megabytes of tools took seconds for each later one-field ``session.update`` (the
whole config deep-copied, twice) and for each ``response.create`` (the tools copied, then encoded
as JSON to count their tokens), and every other session on that server waited meanwhile.
"""

from __future__ import annotations

import json
import math

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
