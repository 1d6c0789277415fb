"""Server events out of place on a GPT-Live connection: before its ``session.started``, or a second one.

Each is a ``malformed_event`` error and is dropped; the session goes on as if it had not come."""

from __future__ import annotations

import numpy as np

from tests.support.live_rig import RATE, SESSION, Rig, audio_delta, frame, start, track
from voxline.session.events import BargeIn, HeardTranscript, SessionError, StateChanged

TONE = np.full(RATE, 2000, np.int16)


def _errors(events: list[object]) -> list[str]:
    return [e.code for e in events if isinstance(e, SessionError)]


def test_output_before_session_started_is_dropped_and_the_reply_after_it_keeps_its_words() -> None:
    """A second of output audio and words before session.started were played and counted: the track's every later
    sample sat a second off the session timeline, a reply heard whole was reported as heard with no words, and the
    user's words cut the audio that came too early, and a function call named then was run."""
    rig = Rig()
    early = [audio_delta(TONE), frame(type="session.output_transcript.delta", event_id="t", delta="early words",
                                      start_ms=0, end_ms=500),
             frame(type="session.input_transcript.delta", event_id="u", delta="early", start_ms=0, end_ms=500),
             frame(type="response.event", event_id="r", delegation_id="d", event={
                 "type": "response.output_item.done", "item": {"type": "function_call", "id": "fc", "call_id": "c",
                                                               "name": "lookup", "arguments": "{}",
                                                               "status": "completed"}})]
    events = [e for text in early for e in rig.feed(text, 0.0)]
    assert _errors(events) == ["malformed_event"] * 4 and not any(isinstance(e, BargeIn) for e in events)
    start(rig)
    track(rig, [(0.5, 1.0)], 2.5)
    told = rig.play(2.5) + rig.events
    (heard,) = [e for e in told if isinstance(e, HeardTranscript)]
    assert heard.text == "Paris is sunny today with" and not heard.estimate
    assert rig.heard[int(0.5 * RATE) + 100:int(1.5 * RATE) - 100].all() and not rig.heard[:int(0.5 * RATE)].any()
    assert rig.machine.calls.sizes()["calls"] == 0  # the call named before the session started is not run


def test_a_second_session_started_is_dropped_and_the_session_keeps_its_id_and_state() -> None:
    """A second session.started mid-reply said 'listening' while the reply played on, and replaced the session's
    id: a stored session dropped after it would have been forked under the other id."""
    rig = Rig(live_store=True)
    start(rig)
    track(rig, [(0.3, 1.0)], 2.0)
    states = rig.play(0.8)
    events = rig.feed(frame(type="session.started", event_id="s2", session={**SESSION, "id": "sess_other"}), rig.t)
    assert _errors(events) == ["malformed_event"] and not any(isinstance(e, StateChanged) for e in events)
    states += rig.play(2.0)
    assert [e.state for e in states if isinstance(e, StateChanged)] == ["speaking", "listening"]
    rig.machine.connection_lost(rig.t, 1006, "dropped")
    assert rig.machine.fork_from == SESSION["id"]
