"""Barge-in planning from ledger figures to truncate/delete/cancel commands."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voxline.session.bargein import CutPart, OutputOwner, Trigger, heard_ms_for_truncate, plan_barge_in


def item(i: str, heard: int, received: int, complete: bool = True) -> CutPart:
    return CutPart(i, 0, heard, received, complete)


def test_partly_heard_item_is_truncated_and_unheard_later_items_deleted() -> None:
    plan = plan_barge_in(
        [item("a", 24_000, 72_000), item("b", 0, 48_000)],
        response_active=True, server_cancels=True, trigger=Trigger.SERVER_VAD,
    )
    assert plan.truncate == (("a", 0, 1000),)
    assert plan.delete == ("b",)
    assert plan.cancel is False  # the server's VAD cancels it itself


def test_interrupt_cancels_an_active_response() -> None:
    plan = plan_barge_in([item("a", 240, 2400, False)], response_active=True, server_cancels=True,
                         trigger=Trigger.INTERRUPT)
    assert plan.cancel and plan.truncate == (("a", 0, 10),)


def test_fully_heard_complete_item_needs_no_cut() -> None:
    plan = plan_barge_in([item("a", 48_000, 48_000)], response_active=False, server_cancels=True,
                         trigger=Trigger.SERVER_VAD)
    assert plan.empty


def test_fully_heard_item_still_streaming_is_cut_at_what_was_heard() -> None:
    plan = plan_barge_in([item("a", 4800, 4800, complete=False)], response_active=True, server_cancels=False,
                         trigger=Trigger.SERVER_VAD)
    assert plan.truncate == (("a", 0, 200),) and plan.cancel


def test_webrtc_lets_the_server_vad_clear_its_own_buffer() -> None:
    plan = plan_barge_in([item("a", 24_000, 72_000)], response_active=True, server_cancels=True,
                         trigger=Trigger.SERVER_VAD, owner=OutputOwner.SERVER, server_playing=True)
    assert plan.empty
    plan = plan_barge_in([], response_active=False, server_cancels=True, trigger=Trigger.INTERRUPT,
                         owner=OutputOwner.SERVER, server_playing=True)
    assert plan.clear_output_buffer and not plan.cancel  # done generating, still playing


def test_webrtc_never_truncates() -> None:
    plan = plan_barge_in([item("a", 24_000, 72_000)], response_active=True, server_cancels=False,
                         trigger=Trigger.INTERRUPT, owner=OutputOwner.SERVER)
    assert plan.truncate == () and plan.delete == () and plan.cancel and plan.clear_output_buffer


@given(st.integers(0, 10**7), st.integers(0, 10**7))
def test_truncate_value_never_exceeds_heard_or_received(heard: int, received: int) -> None:
    ms = heard_ms_for_truncate(heard, received)
    assert ms * 24 <= min(heard, received) < (ms + 1) * 24
