"""GPT-Live: a stop in a reply's closing silence, once every word of it was heard, cuts nothing.

The utterance has ended (its silence closed it) and only that silence is left to play: a local-VAD onset, the
app's interrupt or a drop there revokes nothing audible, so the reply is reported heard to its end, with no
barge-in and no note telling the model the listener stopped hearing it."""

from __future__ import annotations

import pytest

from voxline.session.events import BargeIn, HeardTranscript, LiveDelivered
from voxline.session.report.lines import EventLines
from tests.support.live_rig import WORDS, Rig, sent, start, track


@pytest.mark.parametrize("how", ["local_vad", "interrupt", "drop"])
def test_a_stop_in_the_closing_silence_of_a_reply_heard_whole_is_no_cut(how: str) -> None:
    rig = Rig()
    start(rig)
    track(rig, [(0.5, 2.2)], 4.0)  # voiced 0.5–2.7 s, closed by the silence after it
    rig.play(2.9)  # every word heard; its closing silence plays
    utt = rig.machine.timeline.utterances["live_utt00001"]
    assert utt.closed and rig.playout.heard_samples(utt.uid, 0, rig.t) >= utt.voiced_end
    if how == "local_vad":
        events = list(rig.machine.local_speech(rig.t, rig.t - 0.05).events)
    elif how == "interrupt":
        events = list(rig.machine.interrupt(rig.t).events)
    else:
        events = list(rig.machine.connection_lost(rig.t, 1006, "gone").events)
    assert not any(isinstance(e, BargeIn | LiveDelivered) for e in events)
    (heard,) = [e for e in events if isinstance(e, HeardTranscript)]
    assert heard.text == heard.full_text == " ".join(WORDS) and not heard.estimate
    assert EventLines().line(heard) == f"assistant, as heard (all of it, 2.70 s received): {' '.join(WORDS)}"
    assert not [e for e in sent(rig.protocol) if e["type"] == "session.instructions.append"]
    assert rig.machine.playback.last_note is None  # nothing for the next session to be told either


def test_a_stop_in_a_pause_of_an_utterance_not_ended_is_still_a_cut() -> None:
    """Silence too short to end the utterance: more of it is on its way, and a stop there cuts it."""
    rig = Rig()
    start(rig)
    track(rig, [(0.5, 1.0), (1.8, 1.0)], 3.5, lead=0.0)  # a 300 ms pause: one utterance
    rig.play(1.56)  # every word so far heard, in the pause
    utt = rig.machine.timeline.utterances["live_utt00001"]
    assert not utt.closed and rig.playout.heard_samples(utt.uid, 0, rig.t) >= utt.voiced_end
    events = list(rig.machine.interrupt(rig.t).events)
    assert any(isinstance(e, BargeIn) for e in events) and any(isinstance(e, LiveDelivered) for e in events)
