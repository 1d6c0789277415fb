"""SessionCore with local-VAD holds, on plain lists: nothing is cut until the server confirms."""

from __future__ import annotations

import base64

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.core import SessionCore
from voxline.session.events import BargeIn, FalseBargeIn, PlaybackHeld
from voxline.session.local_barge import BargePolicy, LocalBarge
from tests.support.protocol_frames import frame, sent

B = 480


def speaking(policy: BargePolicy) -> tuple[RealtimeProtocol, PlayoutBuffer, SessionCore]:
    """A response with 1 s of audio, of which the first 100 ms reached the listener."""
    p, playout = RealtimeProtocol(), PlayoutBuffer()
    core = SessionCore(p, playout)
    core.local = LocalBarge(policy)
    config = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
    p.update_session(config)
    p.receive(frame({"type": "session.updated", "session": config}))
    item = {"id": "item_a", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    response = {"id": "resp_1", "object": "realtime.response", "status": "in_progress", "output": []}
    audio = base64.b64encode(np.ones(24000, "<i2").tobytes()).decode()
    for payload in (
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item},
        {"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "item_a", "output_index": 0,
         "content_index": 0, "delta": audio},
    ):
        p.receive(frame(payload))
        for out in p.events():
            core.handle(out, 0.0)
    sent(p)
    for k in range(5):
        playout.read_into(np.zeros(B, np.int16), k * B / 24000)
    return p, playout, core


def play(playout: PlayoutBuffer, core: SessionCore, start: int, blocks: int) -> list[object]:
    events: list[object] = []
    for k in range(start, start + blocks):
        playout.read_into(np.zeros(B, np.int16), k * B / 24000)
        events += core.tick((k + 1) * B / 24000).events
    return events


def test_local_speech_holds_without_a_cut_and_the_server_confirms_it() -> None:
    p, playout, core = speaking(BargePolicy(grace_s=1.0))
    held = core.local_speech(0.1, onset=0.08)
    assert held.barge_in is None and held.commands == () and sent(p) == []
    (event,) = [e for e in held.events if isinstance(e, PlaybackHeld)]
    assert event.item_id == "item_a" and event.heard_ms == 100.0 and event.onset == 0.08
    play(playout, core, 5, 10)  # 200 ms of silence: nothing more is heard
    assert playout.heard_samples("item_a", 0, 1.0) == 2400
    p.receive(frame({"type": "input_audio_buffer.speech_started", "item_id": "item_u", "audio_start_ms": 0}))
    (out,) = p.events()
    result = core.handle(out, 0.3)
    assert isinstance(result.barge_in, BargeIn) and result.barge_in.trigger == "local_vad"
    # cut at the held point; the server cancels on speech itself (interrupt_response), so no cancel
    assert result.commands == (ev.ConversationItemTruncate(item_id="item_a", audio_end_ms=100),)
    assert [e["type"] for e in sent(p)] == ["conversation.item.truncate"]


def test_an_unconfirmed_hold_is_a_false_barge_in_that_resumes_at_the_heard_point() -> None:
    p, playout, core = speaking(BargePolicy(grace_s=0.2, resume=True))
    core.local_speech(0.1, onset=0.09)
    events = play(playout, core, 5, 10)  # grace ends at 0.3 s
    (false,) = [e for e in events if isinstance(e, FalseBargeIn)]
    assert false.resumed and false.held_at == 0.1 and false.heard_ms == 100.0 and sent(p) == []
    out = np.zeros(B, np.int16)
    playout.read_into(out, 15 * B / 24000)
    assert out.all() and playout.heard_samples("item_a", 0, 1.0) == 2400 + B  # went on from sample 2400
    assert not [e for e in events if isinstance(e, BargeIn)]


def test_without_resume_the_false_barge_in_cuts_at_the_held_point() -> None:
    p, playout, core = speaking(BargePolicy(grace_s=0.2, resume=False))
    core.local_speech(0.1, onset=0.09)
    events = play(playout, core, 5, 10)
    (false,) = [e for e in events if isinstance(e, FalseBargeIn)]
    (barge,) = [e for e in events if isinstance(e, BargeIn)]
    assert not false.resumed and barge.trigger == "local_vad" and barge.audio_end_ms == 100
    assert [e["type"] for e in sent(p)] == ["conversation.item.truncate", "response.cancel"]


def test_local_speech_in_silence_or_without_local_vad_does_nothing() -> None:
    p = RealtimeProtocol()
    core = SessionCore(p, PlayoutBuffer())
    core.local = LocalBarge()
    assert core.local_speech(1.0, 0.9).events == ()  # nothing audible
    _p, playout, core = speaking(BargePolicy())
    core.local = None
    assert core.local_speech(0.1, 0.09).events == () and not playout.held


def test_interrupt_while_held_cuts_once_and_clears_the_hold() -> None:
    p, playout, core = speaking(BargePolicy(grace_s=0.2))
    core.local_speech(0.1, onset=0.09)
    result = core.interrupt(0.15)
    assert result.barge_in is not None and result.barge_in.audio_end_ms == 100
    assert core.local is not None and not core.local.held
    assert not [e for e in play(playout, core, 5, 10) if isinstance(e, FalseBargeIn)]


def test_the_talk_screen_marks_holds_and_false_barge_ins() -> None:
    from voxline.session.cli.talk_view import TalkModel

    model = TalkModel(endpoint="local", mode="voice activity")
    model.apply(PlaybackHeld(1.0, 0.9, "item_a", 120.0), " 1.00s")
    model.apply(FalseBargeIn(2.0, 1.0, "item_a", 120.0, resumed=True), " 2.00s")
    assert list(model.marks) == [" 1.00s you (local VAD): assistant held at 120 ms heard, waiting for the server",
                           " 2.00s false barge-in: resuming where you stopped listening"]
