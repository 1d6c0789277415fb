"""A conversation of days across a reconnect: the newest items go to the new connection, the rest are forgotten."""

from __future__ import annotations

import json

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.events import ConnectionRestored
from voxline.session.machine import SessionMachine
from voxline.session.report.lines import EventLines
from voxline.session.settings import SessionSettings


def _said(machine: SessionMachine, protocol: RealtimeProtocol, count: int) -> None:
    """``count`` typed messages, each echoed into the server's conversation."""
    previous = None
    for n in range(count):
        item = {"id": f"item_{n:05d}", "object": "realtime.item", "type": "message", "role": "user",
                "status": "completed", "content": [{"type": "input_text", "text": f"message {n}"}]}
        protocol.receive(json.dumps({"type": "conversation.item.added", "event_id": f"e{n}",
                                     "previous_item_id": previous, "item": item}))
        for output in protocol.events():
            machine.receive(output, 0.0)
        previous = item["id"]


def test_a_reconnect_gives_the_new_connection_the_newest_items_and_says_how_many_were_left_out() -> None:
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none", rebuild_items=100), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    _said(machine, protocol, 1000)
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(1.5)
    created = [json.loads(t) for t in fresh.data_to_send()]
    assert [e["item"]["id"] for e in created] == [f"item_{n:05d}" for n in range(900, 1000)]
    assert created[0]["previous_item_id"] == "root"
    assert (restored.replayed_items, restored.older_items) == (100, 900)
    assert len(machine.mirror) == 100  # the older ones are forgotten
    line = EventLines().line(ConnectionRestored(1.5, 100, older_items=900))
    assert line == "connection restored (100 conversation items sent again; the 900 oldest items left out)"
