"""``response.create`` parameters the schema cannot judge alone, refused as the service refuses them."""

from __future__ import annotations

from typing import Any

import pytest

from voxline.realtime.server.engine.scenario import parse_scenario
from tests.support.engine_harness import Harness, b64, error_of, speech, types


@pytest.mark.parametrize("modalities", [["text", "audio"], ["audio", "text"], []])
def test_a_response_asks_for_audio_or_text_never_both_or_none(modalities: list[str]) -> None:
    h = Harness()
    err = error_of(h.send({"type": "response.create", "event_id": "evt_r",
                           "response": {"output_modalities": modalities}}))
    assert (err["type"], err["code"], err["param"], err["event_id"]) == (
        "invalid_request_error", "invalid_value", "response.output_modalities", "evt_r")
    assert h.run() == []  # no response started
    response: dict[str, Any] = {"output_modalities": ["text"]}
    assert types(h.send({"type": "response.create", "response": response}))[0] == "response.created"


def _heard_scenario() -> Any:
    return parse_scenario({"turns": [{"say": "Sorry?", "when": [{"heard": "weather", "say": "Sunny."}]}]})


@pytest.mark.parametrize(("response", "param"), [
    ({"metadata": {str(k): "x" for k in range(17)}}, "response.metadata"),
    ({"reasoning": {"effort": "low"}}, "response.reasoning"),
    ({"output_modalities": ["text", "audio"]}, "response.output_modalities"),
])
def test_a_response_that_would_wait_for_the_users_words_is_checked_before_it_waits(
        response: dict[str, Any], param: str) -> None:
    h = Harness(_heard_scenario(), hearing=True, model="gpt-realtime")  # a listening turn, a model without reasoning
    h.update(audio={"input": {"turn_detection": None}})
    h.send({"type": "input_audio_buffer.append", "audio": b64(speech(0.5))})
    h.send({"type": "input_audio_buffer.commit"})
    err = error_of(h.send({"type": "response.create", "event_id": "evt_r", "response": response}))
    assert (err["param"], err["event_id"]) == (param, "evt_r")
    (job,) = h.engine.take_hearing()
    assert h.engine.provide_hearing(job.item_id, "the weather", h.now) == []  # nothing waited, nothing to start
    assert types(h.send({"type": "response.create"}))[0] == "response.created"
