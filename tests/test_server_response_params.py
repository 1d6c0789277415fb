"""``response.create`` parameters the schema cannot judge alone, refused as the service refuses them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_harness import Harness, error_of, types


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
