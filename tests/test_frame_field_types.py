"""No server frame ends a session, whatever JSON type its ids, types and indexes have.

Every GA server event, as the service sends it, with any of its identifying fields (at any
depth: ``id``, ``item_id``, ``response_id``, ``call_id``, ``previous_item_id``, ``type``,
``role``, ``status``, ``content_index``, ``output_index``, ``event_id``, ``name``) replaced by
a value of any JSON type, goes through the protocol core and the session machine, in the
middle of a reply and around a barge-in. Nothing may raise.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.events import SERVER_EVENT_TYPES
from voxline.realtime.events.samples import server_event_sample
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.bargein import Trigger
from voxline.session.machine import SessionMachine
from voxline.session.settings import SessionSettings

FIELDS = ["id", "item_id", "response_id", "call_id", "previous_item_id", "type", "role", "status",
          "content_index", "output_index", "event_id", "name"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**64, 2**64) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every identifying field in ``node``."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in FIELDS and prefix + (key,) != ("type",):
                out.append(prefix + (key,))
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, prefix + (index,))
    return out


def _set(node: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _session() -> tuple[SessionMachine, RealtimeProtocol, PlayoutBuffer]:
    playout = PlayoutBuffer()
    machine = SessionMachine(SessionSettings(api_key="k"), playout)
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    for kind in ("session.created", "response.created", "response.output_item.added", "conversation.item.added",
                 "response.output_audio.delta"):
        protocol.receive(json.dumps(server_event_sample(kind)))
        for out in protocol.events():
            machine.receive(out, 0.0)
    return machine, protocol, playout


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SERVER_EVENT_TYPES)), st.data())
def test_identifying_fields_of_any_json_type_end_nothing(kind: str, data: st.DataObject) -> None:
    machine, protocol, playout = _session()
    event = server_event_sample(kind)
    paths = _paths(event)
    if paths:
        for path in data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True)):
            _set(event, path, data.draw(json_values))
    protocol.receive(json.dumps(event))
    for out in protocol.events():
        machine.receive(out, 0.02)
    block = np.zeros(480, np.int16)
    playout.read_into(block, 0.02)
    machine.tick(0.04)
    machine.interrupt(0.04, Trigger.INTERRUPT)
    machine.tick(0.3)
    machine.mirror.plan_rebuild(machine.mic.journal.audio_of)
    machine.mirror.to_json()
    protocol.data_to_send()


HOSTILE = [None, [None], {}, {"id": "x"}, 0, -1, 2**70, 1.5, True, "", "x" * 300]


def _feed(event: dict[str, Any]) -> None:
    machine, protocol, playout = _session()
    protocol.receive(json.dumps(event))
    for out in protocol.events():
        machine.receive(out, 0.02)
    playout.read_into(np.zeros(480, np.int16), 0.02)
    machine.tick(0.04)
    machine.interrupt(0.04, Trigger.INTERRUPT)
    machine.mirror.plan_rebuild(machine.mic.journal.audio_of)


def test_every_identifying_field_of_every_event_takes_every_hostile_value() -> None:
    """The sweep: each field alone, and again inside an item whose type no client knows."""
    for kind in sorted(SERVER_EVENT_TYPES):
        for path in _paths(server_event_sample(kind)):
            for value in HOSTILE:
                event = server_event_sample(kind)
                _set(event, path, value)
                _feed(event)
                if len(path) > 1 and path[-1] != "type":
                    _set(event, (*path[:-1], "type"), "call_1")  # an item (or part) of a kind no client knows
                    _feed(event)
