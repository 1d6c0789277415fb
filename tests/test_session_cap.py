"""The 60-minute cap: the session moves to a fresh connection at a turn boundary before it.

The local server's sessions here last 60 s (``max_session_s``, as ``voxline serve
--max-session-minutes`` sets it). With the hand-over on, the session warms up a second
connection in the last quarter of the first one's life, rebuilds the conversation there and
switches while nobody speaks: no drop, no ``session_expired``, no audible gap (the reply
after the switch starts as fast as the one before it, on the virtual clock). With it off,
the server ends the session and the reconnect path recovers it.
"""

from __future__ import annotations

import numpy as np

from tests.support.hostile import run_faulted, speech
from voxline.base.audio_format import SAMPLE_RATE
from voxline.session.events import AssistantAudioStarted, BargeIn, ConnectionLost, ConnectionRestored, SessionError

TURNS = (12.0, 30.0, 52.0, 72.0)  # spoken turns (s); the hand-over window opens at 45 s


def recording() -> np.ndarray:
    rng = np.random.default_rng(11)
    out = np.zeros(90 * SAMPLE_RATE, dtype=np.int16)
    for start in TURNS:
        burst = speech(rng, 1.0)
        at = int(start * SAMPLE_RATE)
        out[at:at + len(burst)] = burst
    return out


def latencies(events: list[object]) -> list[float]:
    return [e.reply_latency for e in events if isinstance(e, AssistantAudioStarted) and e.reply_latency is not None]


def test_the_session_hands_over_before_it_expires_without_a_gap() -> None:
    outcome = run_faulted(None, None, max_session_s=60.0, handover_s=20.0, samples=recording(),
                          scenario_name="default")
    events = outcome.events
    handovers = [e for e in events if isinstance(e, ConnectionRestored) and e.handover]
    assert len(handovers) == 1 and 45.0 <= handovers[0].at < 60.0, handovers
    assert not [e for e in events if isinstance(e, ConnectionLost)]
    assert not [e for e in events if isinstance(e, (BargeIn, SessionError))], "the switch cut or failed something"
    expired = [f for _n, d, f in outcome.wire if d == "in" and f["type"] == "error"]
    assert not expired, expired  # the old session never reached its cap
    # the successor's own life started when it was warmed up (45 s): from 90 s it may warm the next one,
    # which carries nothing yet
    assert 2 <= len(outcome.engines) <= 3
    successor = [entry.item["id"] for entry in outcome.engines[1]._state.conversation]
    assert [m.id for m in outcome.mirror] == successor
    # every spoken turn was answered, the ones after the switch as fast as the ones before it
    heard = latencies(events)
    assert len(heard) >= len(TURNS)
    assert max(heard) - min(heard) <= 0.025, heard
    assert outcome.underruns == 0


def test_without_a_hand_over_the_cap_ends_the_connection_and_it_recovers() -> None:
    outcome = run_faulted(None, None, max_session_s=60.0, handover_s=0.0, samples=recording(),
                          scenario_name="default")
    events = outcome.events
    assert [e.code for e in events if isinstance(e, ConnectionLost)] == [1001]
    assert any(isinstance(e, ConnectionRestored) and not e.handover for e in events)
    assert any(f["type"] == "error" and f["error"]["code"] == "session_expired"
               for _n, d, f in outcome.wire if d == "in")
    assert [m.id for m in outcome.mirror] == [i["id"] for i in outcome.server_items()]
