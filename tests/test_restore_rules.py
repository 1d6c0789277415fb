"""The restore rules on plain values: which creates a new connection owes, and when to hand over."""

from __future__ import annotations

from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from voxline.session.restore import MAX_SESSION_S, creates_owed, handover_due

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
    for server_clock in (True, False):
        due = partial(handover_due, opened_at=0.0, margin_s=120.0, server_clock=server_clock)
        assert not due(hour, elapsed_s=hour - 121) and due(hour, elapsed_s=hour - 120)
        assert not handover_due(hour, opened_at=0.0, elapsed_s=hour, margin_s=0.0, server_clock=server_clock)
        for bad in (None, "soon", 0, -5, True):
            assert not due(bad, elapsed_s=1e12)
    on_server = partial(handover_due, opened_at=0.0, margin_s=120.0, server_clock=True)
    assert on_server(60.0, elapsed_s=45.0) and not on_server(60.0, elapsed_s=44.0)  # a quarter of a short life


@given(skew=st.floats(-86_400 * 400, 86_400 * 400), lifetime=st.sampled_from([60.0, 900.0, 3600.0]))
def test_a_skewed_local_clock_hands_over_at_most_once_per_connection_life(skew: float, lifetime: float) -> None:
    """On the server's clock the skew does not matter; on the local one, a session of the service's
    length hands over at most once in its life, whatever the skew."""
    server_open = 1_800_000_000.0
    expires_at = server_open + lifetime
    first = next(t for t in range(0, int(lifetime) + 1) if handover_due(
        expires_at, opened_at=server_open, elapsed_s=float(t), margin_s=120.0, server_clock=True))
    assert lifetime - min(120.0, lifetime / 4) <= first <= lifetime
    if lifetime == 3600.0:  # the local wall, skewed: never due before a quarter of the service's cap is left
        due = [t for t in range(0, 3601, 5) if handover_due(
            expires_at, opened_at=server_open + skew, elapsed_s=float(t), margin_s=120.0, server_clock=False)]
        assert not due or due[0] >= MAX_SESSION_S / 2 - 120.0
