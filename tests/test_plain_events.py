"""Client events whose every field is a plain string (an audio append above all) pass the local server's
check by a glance at their keys and kinds; anything else, or any doubt, takes the full check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.realtime.server.engine import core
from voxline.realtime.server.engine.client_schema import EVENT_SCHEMAS
from voxline.realtime.server.engine.nulls import without_nulls
from voxline.realtime.server.engine.validate import check_object, plain_strings
from tests.support.engine_harness import Harness, b64, error_of, silence, types

_VALUES = st.one_of(st.text(max_size=8), st.none(), st.integers(), st.floats(allow_nan=False), st.booleans(),
                    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def _events(draw: Any) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(core.PLAIN_EVENTS)))
    keys = draw(st.lists(st.sampled_from([*sorted(EVENT_SCHEMAS[kind]), "extra", "audio", "item_id"]), unique=True))
    plain = draw(st.booleans())  # half of them plain in kind, so that the glance says yes often
    event = {key: draw(st.text(max_size=8) if plain else _VALUES) for key in keys}
    return kind, event


def test_the_plain_events_are_the_string_only_ones() -> None:
    assert {"input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear"} <= set(core.PLAIN_EVENTS)
    assert "session.update" not in core.PLAIN_EVENTS and "response.create" not in core.PLAIN_EVENTS
    assert plain_strings(EVENT_SCHEMAS["conversation.item.truncate"]) is None  # integers in it


@settings(max_examples=400, deadline=None)
@given(_events())
def test_what_the_glance_lets_through_the_full_check_takes_as_it_is(case: tuple[str, dict[str, Any]]) -> None:
    kind, event = case
    schema = EVENT_SCHEMAS[kind]
    if not core.PLAIN_EVENTS[kind].holds(event):
        return
    assert without_nulls(event, schema) == event  # no null to drop
    check_object(event, schema)  # and nothing to refuse


def test_an_append_goes_by_the_glance_and_a_bad_one_is_refused_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    refused = {"type": "input_audio_buffer.append", "audio": 5}
    expected = error_of(h.send(refused))
    assert expected["code"] == "invalid_type" and expected["param"] == "audio"
    missing = error_of(h.send({"type": "input_audio_buffer.append", "event_id": "e1", "audio": None}))
    assert missing["code"] == "missing_required_parameter"

    def full_check(value: Any, schema: Any, path: str = "") -> None:
        calls.append(dict(value))
        check_object(value, schema, path)

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(core, "check_object", full_check)
    plain = {"type": "input_audio_buffer.append", "event_id": "e2", "audio": b64(silence(0.04))}
    assert "error" not in types(h.send(plain))
    assert calls == []  # before: every append walked the full check
    assert error_of(h.send(refused)) == expected  # not plain: the full check, the same error
    assert calls == [refused]
