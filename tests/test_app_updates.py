"""The app's updates on their way to the server (``voxline.session.machine.updates``), driven as the machine drives
them against a server that takes or refuses each ``session.update`` whole."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from voxline.session.machine.updates import TAKEN, AppUpdates, Update

FIELDS = ("instructions", "voice")


class Client:
    """The machine's part: its settings and offered tools, an update made from what they were, sent when told."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {"instructions": "i0", "voice": "v0"}
        self.offered: list[str] | None = None
        self.updates = AppUpdates()
        self.wire: list[tuple[str, dict[str, Any], list[str] | None]] = []  # session.update: id, settings, tools
        self.ids = 0

    def send(self, update: Update) -> None:
        self.ids += 1
        event_id = f"evt_{self.ids}"
        self.wire.append((event_id, dict(self.settings), self.offered))
        self.updates.went(update, event_id)

    def update(self, changes: dict[str, Any], tools: list[str] | None, choose_tools: bool) -> None:
        before = {name: self.settings[name] for name in changes}
        update = Update(dict(changes), before, choose_tools, self.offered)
        self.settings.update(changes)
        if choose_tools:
            self.offered = tools
        if self.updates.made(update):
            self.send(update)

    def answered(self, event_id: str, refused: bool) -> None:
        undo = self.updates.answered(event_id, refused=refused)
        if undo is None:
            return
        self.settings.update(undo.settings)
        if undo.tools:
            self.offered = undo.offered
        following = self.updates.take_waiting()
        if following is not None:
            self.send(following)


changes = st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(["a", "b", "c", "d"]), max_size=2)
steps = st.lists(st.one_of(
    st.tuples(st.just("update"), changes, st.sampled_from([None, ["t1"], ["t2"]]), st.booleans()),
    st.tuples(st.just("answer"), st.booleans()),
), max_size=30)


@given(steps)
def test_at_most_one_update_is_on_the_wire_and_the_client_ends_with_what_the_server_has(plan: list[Any]) -> None:
    """A server that applies a ``session.update`` whole or not at all: once every update is answered, the client's
    settings and offered tools are the server's, whatever was refused on the way."""
    client = Client()
    server = {"settings": dict(client.settings), "offered": client.offered}
    answered = 0

    def answer(refuse: bool) -> None:
        nonlocal answered
        event_id, settings, offered = client.wire[answered]
        answered += 1
        if not refuse:
            server["settings"], server["offered"] = settings, offered
        client.answered(event_id, refused=refuse)

    for step in plan:
        if step[0] == "update":
            client.update(step[1], step[2], step[3])
        elif answered < len(client.wire):
            answer(step[1])
        assert len(client.wire) - answered <= 1  # one on the wire at a time
    while answered < len(client.wire):  # the rest taken
        answer(False)
    assert client.updates.sent is None and client.updates.waiting is None
    assert client.settings == server["settings"] and client.offered == server["offered"]


def test_an_update_made_meanwhile_waits_and_takes_in_later_ones_keeping_the_earliest_before() -> None:
    updates = AppUpdates()
    first = Update({"voice": "b"}, {"voice": "a"}, False, None)
    assert updates.made(first)
    updates.went(first, "evt_1")
    assert not updates.made(Update({"voice": "c"}, {"voice": "b"}, False, None))
    assert not updates.made(Update({"voice": "d", "instructions": "x"}, {"voice": "c", "instructions": "w"}, True,
                                   ["t"]))
    waiting = updates.waiting
    assert waiting is not None
    assert waiting.changed == {"voice": "d", "instructions": "x"}
    assert waiting.before == {"voice": "b", "instructions": "w"} and waiting.tools_changed
    undo = updates.answered("evt_1", refused=True)  # the voice changes again in the waiting one: it goes back as far
    assert undo is not None and undo.settings == {} and not undo.tools
    assert waiting.before["voice"] == "a"
    assert updates.take_waiting() is waiting and updates.waiting is None


def test_an_answer_that_is_not_the_apps_changes_nothing() -> None:
    updates = AppUpdates()
    assert updates.answered(None, refused=False) is None  # the connection's first configuration
    first = Update({"voice": "b"}, {"voice": "a"}, False, None)
    updates.made(first)
    updates.went(first, "evt_1")
    assert updates.answered("evt_other", refused=True) is None and updates.sent is first
    assert updates.answered(None, refused=False) is TAKEN and updates.sent is None
    updates.made(first)
    updates.reset()
    assert updates.sent is None and updates.waiting is None
