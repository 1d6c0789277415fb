"""The listening/thinking/speaking table, walked pair by pair and by Hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voxline.session.turn_state import TRANSITIONS, TurnInput, TurnState, step

inputs = st.lists(st.sampled_from(list(TurnInput)), max_size=60)


def test_every_state_input_pair_has_exactly_one_transition() -> None:
    assert set(TRANSITIONS) == {(s, i) for s in TurnState for i in TurnInput}
    assert len(TRANSITIONS) == len(TurnState) * len(TurnInput)
    assert all(isinstance(nxt, TurnState) for nxt in TRANSITIONS.values())


@given(st.sampled_from(list(TurnState)), st.sampled_from(list(TurnInput)))
def test_each_transition_keeps_the_rules(state: TurnState, inp: TurnInput) -> None:
    nxt = step(state, inp)
    if nxt is TurnState.SPEAKING and state is not TurnState.SPEAKING:
        assert inp is TurnInput.AUDIBLE  # speaking begins only when audio reaches the listener
    if inp is TurnInput.BARGE_IN:
        assert nxt is TurnState.LISTENING
    if inp is TurnInput.AUDIBLE:
        assert nxt is TurnState.SPEAKING
    if inp is TurnInput.UNDERRUN:
        assert nxt is state  # a gap while the reply streams changes nothing
    if inp is TurnInput.SPEECH_STOPPED:
        assert nxt is TurnState.THINKING
    if state is TurnState.SPEAKING and nxt is TurnState.LISTENING:
        assert inp in (TurnInput.DRAINED, TurnInput.BARGE_IN)


@given(inputs)
def test_speaking_only_after_audio_was_audible(sequence: list[TurnInput]) -> None:
    """Each stretch of speaking starts with audio at the listener; a barge-in ends it."""
    state = TurnState.LISTENING
    audible = False  # audio was audible since the state last was not speaking
    for inp in sequence:
        state = step(state, inp)
        audible = audible or inp is TurnInput.AUDIBLE
        if state is TurnState.SPEAKING:
            assert audible
        else:
            audible = False
        if inp is TurnInput.BARGE_IN:
            assert state is TurnState.LISTENING


@given(inputs, st.sampled_from(list(TurnState)))
def test_no_state_is_a_trap(sequence: list[TurnInput], target: TurnState) -> None:
    """Whatever happened, every state can still be reached."""
    state = TurnState.LISTENING
    for inp in sequence:
        state = step(state, inp)
    frontier, seen = [state], {state}
    while frontier:
        here = frontier.pop()
        for inp in TurnInput:
            nxt = step(here, inp)
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    assert target in seen


def test_a_turn_and_a_barge_in() -> None:
    turn = [
        (TurnInput.SPEECH_STOPPED, TurnState.THINKING),
        (TurnInput.RESPONSE_CREATED, TurnState.THINKING),
        (TurnInput.UNDERRUN, TurnState.THINKING),  # created, no audio yet
        (TurnInput.AUDIBLE, TurnState.SPEAKING),
        (TurnInput.UNDERRUN, TurnState.SPEAKING),  # a network gap mid-reply
        (TurnInput.DRAINED, TurnState.LISTENING),
        (TurnInput.RESPONSE_CREATED, TurnState.THINKING),
        (TurnInput.AUDIBLE, TurnState.SPEAKING),
        (TurnInput.BARGE_IN, TurnState.LISTENING),
        (TurnInput.UNDERRUN, TurnState.LISTENING),  # the cancelled reply is still winding down
    ]
    state = TurnState.LISTENING
    for inp, expected in turn:
        state = step(state, inp)
        assert state is expected, inp
