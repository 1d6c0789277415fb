"""Whose turn it is, as data: listening, thinking or speaking.

The session reports one of three states to the application (:class:`~voxline.session.events.StateChanged`):

=============  ===============================================================
``LISTENING``  the user has the floor (the start, after a reply, after a barge-in)
``THINKING``   the user stopped talking, or a response began; nothing audible yet
``SPEAKING``   assistant audio is reaching the listener
=============  ===============================================================

:class:`~voxline.session.core.SessionCore` turns what happens into one :class:`TurnInput`
(``input_audio_buffer.speech_stopped``, ``response.created``, a playout block, a barge-in)
and looks up the next state in :data:`TRANSITIONS`, which has exactly one entry per
``(state, input)`` pair. Only :attr:`TurnInput.AUDIBLE` enters ``SPEAKING``; a barge-in
always lands in ``LISTENING``; an underrun while the response still streams changes nothing.
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "TurnInput", "TurnState", "step"]


class TurnState(enum.Enum):
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"


class TurnInput(enum.Enum):
    SPEECH_STOPPED = "speech_stopped"  # server: input_audio_buffer.speech_stopped
    RESPONSE_CREATED = "response_created"  # server: response.created
    AUDIBLE = "audible"  # a playout block: assistant audio at the listener (not a cut's fade)
    DRAINED = "drained"  # a playout block: nothing playing or queued, no response in progress
    UNDERRUN = "underrun"  # a playout block: nothing audible, but audio queued or a response streaming
    BARGE_IN = "barge_in"  # the session cut the assistant (interrupt(), server or local VAD)


_S, _I = TurnState, TurnInput

TRANSITIONS: dict[tuple[TurnState, TurnInput], TurnState] = {
    # LISTENING
    (_S.LISTENING, _I.SPEECH_STOPPED): _S.THINKING,
    (_S.LISTENING, _I.RESPONSE_CREATED): _S.THINKING,
    (_S.LISTENING, _I.AUDIBLE): _S.SPEAKING,
    (_S.LISTENING, _I.DRAINED): _S.LISTENING,
    (_S.LISTENING, _I.UNDERRUN): _S.LISTENING,
    (_S.LISTENING, _I.BARGE_IN): _S.LISTENING,
    # THINKING: waits for audio; a response without audio leaves it to the next turn
    (_S.THINKING, _I.SPEECH_STOPPED): _S.THINKING,
    (_S.THINKING, _I.RESPONSE_CREATED): _S.THINKING,
    (_S.THINKING, _I.AUDIBLE): _S.SPEAKING,
    (_S.THINKING, _I.DRAINED): _S.THINKING,
    (_S.THINKING, _I.UNDERRUN): _S.THINKING,
    (_S.THINKING, _I.BARGE_IN): _S.LISTENING,
    # SPEAKING
    (_S.SPEAKING, _I.SPEECH_STOPPED): _S.THINKING,
    (_S.SPEAKING, _I.RESPONSE_CREATED): _S.SPEAKING,
    (_S.SPEAKING, _I.AUDIBLE): _S.SPEAKING,
    (_S.SPEAKING, _I.DRAINED): _S.LISTENING,
    (_S.SPEAKING, _I.UNDERRUN): _S.SPEAKING,
    (_S.SPEAKING, _I.BARGE_IN): _S.LISTENING,
}


def step(state: TurnState, event: TurnInput) -> TurnState:
    """Look up one transition; every pair is defined."""
    return TRANSITIONS[(state, event)]
