"""The restore rules on plain values: which creates a new connection owes, and when to hand over."""

from __future__ import annotations

from voxline.session.restore import creates_owed, handover_due

CREATE = {"type": "response.create"}
WITH_TEXT = {"type": "response.create", "response": {"instructions": "be brief"}}


def test_each_owed_create_once_and_tool_responses_left_to_the_tracker() -> None:
    owed = [("resp_1", WITH_TEXT), (None, CREATE)]
    assert creates_owed(owed, set(), cut_short=False, texts_while_away=0) == [WITH_TEXT, CREATE]
    assert creates_owed(owed, {"resp_1"}, cut_short=False, texts_while_away=0) == [CREATE]
    assert creates_owed([], set(), cut_short=False, texts_while_away=0) == []


def test_a_reply_cut_short_is_asked_for_once_and_messages_sent_away_each_get_one() -> None:
    assert creates_owed([], set(), cut_short=True, texts_while_away=0) == [CREATE]
    assert creates_owed([("resp_1", CREATE)], set(), cut_short=True, texts_while_away=0) == [CREATE]
    assert creates_owed([], {"resp_1"}, cut_short=True, texts_while_away=0) == []  # the tracker goes on
    assert creates_owed([], set(), cut_short=False, texts_while_away=2) == [CREATE, CREATE]


def test_the_hand_over_window() -> None:
    hour = 3600.0
    assert not handover_due(hour, wall_now=hour - 121, opened_wall=0.0, margin_s=120.0)
    assert handover_due(hour, wall_now=hour - 120, opened_wall=0.0, margin_s=120.0)
    assert handover_due(60.0, wall_now=45.0, opened_wall=0.0, margin_s=120.0)  # a quarter of a short life
    assert not handover_due(60.0, wall_now=44.0, opened_wall=0.0, margin_s=120.0)
    assert not handover_due(hour, wall_now=hour, opened_wall=0.0, margin_s=0.0)
    for bad in (None, "soon", 0, -5, True):
        assert not handover_due(bad, wall_now=1e12, opened_wall=0.0, margin_s=120.0)
