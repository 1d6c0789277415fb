"""What the service refuses, the local server refuses; what it sends, the local server sends.

Evidence (docs/protocol.md §12 and the README's server section): ``session.created`` carries
``silence_duration_ms`` 200 as published GA traces show (the SDK's docstring says 500);
an unknown voice is ``invalid_value`` "Invalid value: '…'. Supported values are: …" as a
service trace shows for voices; transcription models are the SDK's list; ``reasoning`` and
``parallel_tool_calls`` belong to reasoning models such as gpt-realtime-2.
"""

from __future__ import annotations

from typing import Any

import pytest

from voxline.realtime.server.engine.session_schema import TRANSCRIPTION_MODELS, VOICES
from tests.support.engine_harness import Harness, error_of, only, types


def update(h: Harness, **session: Any) -> list[dict[str, Any]]:
    return h.send({"type": "session.update", "session": {"type": "realtime", **session}})


def test_session_created_has_the_services_vad_defaults() -> None:
    vad = Harness().opened[0]["session"]["audio"]["input"]["turn_detection"]
    assert (vad["type"], vad["threshold"], vad["prefix_padding_ms"], vad["silence_duration_ms"]) == (
        "server_vad", 0.5, 300, 200)
    filled = update(Harness(), audio={"input": {"turn_detection": {"type": "server_vad"}}})
    assert filled[0]["session"]["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 200


def test_an_unknown_voice_is_refused_in_session_update_and_response_create() -> None:
    h = Harness()
    error = error_of(update(h, audio={"output": {"voice": "nova"}}))
    assert error["code"] == "invalid_value" and error["param"] == "session.audio.output.voice"
    assert error["message"].startswith("Invalid value: 'nova'. Supported values are: 'alloy', 'ash',")
    assert error["message"].endswith("'marin', and 'cedar'.")
    error = error_of(h.send({"type": "response.create", "response": {"audio": {"output": {"voice": "fable"}}}}))
    assert error["param"] == "response.audio.output.voice"
    for voice in VOICES:
        assert "error" not in types(update(Harness(), audio={"output": {"voice": voice}}))
    assert "error" not in types(update(h, audio={"output": {"voice": {"id": "voice_custom_1"}}}))


def test_an_unknown_transcription_model_is_refused() -> None:
    h = Harness()
    error = error_of(update(h, audio={"input": {"transcription": {"model": "gpt-9-transcribe"}}}))
    assert error["code"] == "invalid_value" and error["param"] == "session.audio.input.transcription.model"
    assert "'gpt-transcribe'" in error["message"]
    for model in TRANSCRIPTION_MODELS:
        assert "error" not in types(update(h, audio={"input": {"transcription": {"model": model}}}))


@pytest.mark.parametrize("key, value", [("reasoning", {"effort": "low"}), ("parallel_tool_calls", False)])
def test_reasoning_settings_are_for_reasoning_models_only(key: str, value: Any) -> None:
    old = Harness(model="gpt-realtime")
    error = error_of(update(old, **{key: value}))
    assert (error["code"], error["param"]) == ("unsupported_parameter", f"session.{key}")
    error = error_of(old.send({"type": "response.create", "response": {key: value}}))
    assert error["param"] == f"response.{key}"
    current = Harness(model="gpt-realtime-2.1")
    assert "error" not in types(update(current, **{key: value}))
    events = current.send({"type": "response.create", "response": {key: value}}) + current.run()
    assert only(events, "response.done")[0]["response"]["status"] == "completed"


def test_reasoning_effort_takes_the_sdks_values() -> None:
    h = Harness(model="gpt-realtime-2")
    for effort in ("minimal", "low", "medium", "high", "xhigh"):
        assert "error" not in types(update(h, reasoning={"effort": effort}))
    assert error_of(update(h, reasoning={"effort": "extreme"}))["param"] == "session.reasoning.effort"
