"""The assistant's state on a GPT-Live session while the output track comes late: it follows the reply, not the
network's jitter."""

from __future__ import annotations

import numpy as np

from tests.support.live_rig import RATE, Rig, audio_delta, start
from voxline.session.events import StateChanged


def test_a_reply_whose_closing_silence_comes_late_does_not_flicker_between_listening_and_speaking() -> None:
    """The reply's voice is over and the track's silence after it arrives late: the state said listening in the gap,
    speaking again when the silence came (it is still part of the utterance) and listening once more when it closed.
    A reply is over when its utterance is, on time or late."""
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(RATE) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1
    states = rig.feed(audio_delta(tone), rig.t) + rig.feed(audio_delta(np.zeros(2400, np.int16)), rig.t)
    states += rig.play(1.2)  # the voice and 100 ms of silence heard, then nothing for 100 ms
    states += rig.feed(audio_delta(np.zeros(2400, np.int16)), rig.t)  # the rest of the silence, late
    states += rig.play(1.4)
    states += rig.feed(audio_delta(np.zeros(RATE, np.int16)), rig.t)
    states += rig.play(3.0)
    assert [e.state for e in states if isinstance(e, StateChanged)] == ["speaking", "listening"]
