"""The session machine on plain lists, and the proof that it does no I/O.

The machine is driven here exactly as ``VoiceSession`` drives it, with a protocol core fed
frames as text and its outbox read as text: no sockets, no event loop, no clock.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.protocol import RealtimeProtocol
from voxline.session.bargein import Trigger
from voxline.session.events import (AssistantAudioStarted, BargeIn, ConnectionLost, ConnectionRestored, SessionError,
                                    SpeechStarted)
from voxline.session.machine import NO_EFFECTS, SessionMachine
from voxline.session.settings import SessionSettings
from tests.support.imports import imports_in, reached

FORBIDDEN = {"asyncio", "socket", "selectors", "time", "subprocess", "websockets", "aiortc", "sounddevice",
             "voxline.base.clock"}


def test_nothing_under_the_session_machine_does_io_or_reads_a_clock() -> None:
    closure = reached(["voxline.session.machine", "voxline.session.live.machine"])
    assert {"voxline.session.machine.machine", "voxline.session.core", "voxline.session.mirror.mirror",
            "voxline.session.input_journal", "voxline.session.tools.calls", "voxline.session.metrics.tracker",
            "voxline.realtime.protocol", "voxline.audio.playout", "voxline.session.live.playback",
            "voxline.session.live.carrier", "voxline.realtime.live.protocol"} <= set(closure)
    bad = {name: closure[name] for name in closure if name in FORBIDDEN or name.split(".")[0] in FORBIDDEN}
    assert bad == {}, f"imported by: {bad}"


def test_the_closure_check_sees_an_import_of_asyncio(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import numpy\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import socket\n"
                      "def f():\n    import asyncio\n")
    assert imports_in(source, "voxline.session.m") == {"numpy", "typing", "asyncio"}


# ---------------------------------------------------------------------- a conversation on plain lists
def frame(payload: dict[str, object]) -> str:
    return json.dumps({"event_id": "event_x", **payload})


def reply_frames(item_id: str, samples: int) -> list[str]:
    item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    audio = base64.b64encode(np.full(samples, 1000, "<i2").tobytes()).decode()
    return [
        frame({"type": "response.created", "response": {"id": "resp_1", "object": "realtime.response",
                                                        "status": "in_progress", "output": []}}),
        frame({"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item}),
        frame({"type": "conversation.item.added", "previous_item_id": None, "item": item}),
        frame({"type": "response.output_audio_transcript.delta", "response_id": "resp_1", "item_id": item_id,
               "output_index": 0, "content_index": 0, "delta": "one two three four five six seven eight"}),
        frame({"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": item_id,
               "output_index": 0, "content_index": 0, "delta": audio}),
    ]


def machine_on_a_connection() -> tuple[SessionMachine, RealtimeProtocol, PlayoutBuffer]:
    playout = PlayoutBuffer()
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none"), playout)
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    return machine, protocol, playout


def receive(machine: SessionMachine, protocol: RealtimeProtocol, frames: list[str], now: float) -> list[object]:
    effects = []
    for text in frames:
        protocol.receive(text)
        effects += [machine.receive(out, now) for out in protocol.events()]
    return effects


def play(machine: SessionMachine, playout: PlayoutBuffer, until: float) -> None:
    block = np.zeros(480, np.int16)
    t = 0.0
    while t < until - 1e-9:
        playout.read_into(block, t)
        t += 0.02
        machine.tick(t)


def sent(protocol: RealtimeProtocol) -> list[dict[str, object]]:
    return [json.loads(text) for text in protocol.data_to_send()]


def test_a_barge_in_is_one_step_cut_where_the_listener_is() -> None:
    machine, protocol, playout = machine_on_a_connection()
    receive(machine, protocol, reply_frames("item_a", 24_000), 0.0)  # one second of reply
    sent(protocol)
    play(machine, playout, 0.4)
    effects = machine.interrupt(0.4, Trigger.INTERRUPT)
    barge_in = effects.barge_in
    assert isinstance(barge_in, BargeIn) and barge_in in effects.events
    truncate = [e for e in sent(protocol) if e["type"] == "conversation.item.truncate"]
    assert len(truncate) == 1 and truncate[0]["item_id"] == "item_a"
    heard_ms = truncate[0]["audio_end_ms"]
    assert isinstance(heard_ms, int) and abs(heard_ms - barge_in.heard_ms) < 1 and 380 <= heard_ms <= 420
    mirrored = machine.mirror.get("item_a")
    assert mirrored is not None and mirrored.heard_ms == barge_in.heard_ms
    receive(machine, protocol, [frame({"type": "response.done", "response": {
        "id": "resp_1", "object": "realtime.response", "status": "cancelled", "output": []}})], 0.45)
    assert machine.interrupt(0.5, Trigger.INTERRUPT) is NO_EFFECTS  # nothing left to cut


def test_server_speech_over_the_reply_cuts_it_in_the_step_that_receives_it() -> None:
    machine, protocol, playout = machine_on_a_connection()
    receive(machine, protocol, reply_frames("item_a", 24_000), 0.0)
    play(machine, playout, 0.3)
    (effects,) = receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started",
                                                     "audio_start_ms": 300, "item_id": "item_u"})], 0.3)
    assert isinstance(effects.barge_in, BargeIn)
    assert [type(e) for e in effects.events][:1] == [SpeechStarted]


def test_a_drop_keeps_what_was_heard_and_the_restore_asks_for_the_reply_again() -> None:
    machine, protocol, playout = machine_on_a_connection()
    receive(machine, protocol, reply_frames("item_a", 24_000), 0.0)
    sent(protocol)
    play(machine, playout, 0.5)
    protocol.connection_lost()
    lost = machine.connection_lost(0.5, 1006, "gone")
    assert isinstance(lost.events[0], ConnectionLost) and lost.barge_in is not None
    assert not machine.carrying and machine.send_text("still there?") is False  # kept for the next connection
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(0.6)
    assert isinstance(restored, ConnectionRestored)
    out = sent(fresh)
    created = [e["item"]["id"] for e in out if e["type"] == "conversation.item.create"]  # type: ignore[index]
    assert "item_a" in created  # the heard part of the reply is rebuilt
    # one create for the reply cut short, one for the text sent while away (queued behind the first)
    assert restored.resent_creates == 2
    assert sum(e["type"] == "response.create" for e in out) == 1 and fresh.queued_creates == 1


def test_commands_between_a_closed_protocol_and_its_drop_being_taken_are_kept() -> None:
    """The driver closes a silent server's connection before the receive loop takes the drop: a text sent between
    raised 'cannot send: the connection is closed'; the session is away from then on, and keeps it."""
    machine, protocol, _playout = machine_on_a_connection()
    sent(protocol)
    protocol.connection_lost()
    assert not machine.carrying
    assert machine.send_text("still there?") is False
    machine.connection_lost(0.5, 4000, "server silent")
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    machine.restore(0.6)
    texts = [e["item"]["content"][0]["text"] for e in sent(fresh) if e["type"] == "conversation.item.create"]  # type: ignore[index]
    assert texts == ["still there?"]


def test_the_bulk_of_a_reply_asks_nothing_of_the_driver() -> None:
    machine, protocol, _playout = machine_on_a_connection()
    receive(machine, protocol, reply_frames("item_a", 4_800), 0.0)
    more = frame({"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "item_a",
                  "output_index": 0, "content_index": 0,
                  "delta": base64.b64encode(np.zeros(480, "<i2").tobytes()).decode()})
    assert receive(machine, protocol, [more], 0.0) == [NO_EFFECTS]



def test_every_part_of_a_burst_reports_its_first_heard_sample() -> None:
    """Twelve short items queued at once: each one's start is reported when it plays, none skipped."""
    machine, protocol, playout = machine_on_a_connection()
    frames = []
    for n in range(12):
        item_id = f"item_{n:02d}"
        item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
        frames += [
            frame({"type": "response.output_item.added", "response_id": "resp_1", "output_index": n, "item": item}),
            frame({"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": item_id,
                   "output_index": n, "content_index": 0,
                   "delta": base64.b64encode(np.full(480, 1000, "<i2").tobytes()).decode()}),
        ]
    receive(machine, protocol, frames, 0.0)
    started: list[str] = []
    block = np.zeros(480, np.int16)
    for k in range(16):
        playout.read_into(block, k * 0.02)
        started += [e.item_id for e in machine.tick((k + 1) * 0.02).events if isinstance(e, AssistantAudioStarted)]
    assert started == [f"item_{n:02d}" for n in range(12)]


def test_over_webrtc_the_tracks_audio_reports_its_start_with_the_reply_latency() -> None:
    playout = PlayoutBuffer()
    machine = SessionMachine(SessionSettings(api_key="k", transport="webrtc"), playout)
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    assert machine.track is not None
    item = {"id": "item_a", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    receive(machine, protocol, [
        frame({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 900, "item_id": "item_u"}),
        frame({"type": "response.created", "response": {"id": "resp_1", "object": "realtime.response",
                                                        "status": "in_progress", "output": []}}),
        frame({"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item}),
        frame({"type": "output_audio_buffer.started", "response_id": "resp_1"}),
    ], 1.0)
    machine.track.on_audio(np.full(1440, 1000, np.int16))  # the remote track's first 60 ms: the lead it gathers
    block = np.zeros(480, np.int16)
    playout.read_into(block, 1.25)
    events = machine.tick(1.27).events
    (started,) = [e for e in events if isinstance(e, AssistantAudioStarted)]
    assert started.item_id == "item_a" and started.reply_latency == pytest.approx(0.25)


def test_text_that_cannot_be_sent_is_refused_and_never_kept_for_a_reconnect() -> None:
    machine, protocol, _playout = machine_on_a_connection()
    sent(protocol)
    half_an_emoji = json.loads('"caf\\ud83d"')  # what a browser's broken JSON may hand an app
    with pytest.raises(ConfigurationError, match=r"^send_text: the text cannot be sent: character 3 is a lone surrogate"):
        machine.send_text(half_an_emoji)
    with pytest.raises(ConfigurationError, match=r"^send_text: the text is \d+ bytes as JSON, and one event carries"):
        machine.send_text('"' * (15 * 1024 * 1024))  # 15 MiB of text, 30 as JSON: each quote is escaped
    with pytest.raises(ConfigurationError, match=r"^update: instructions is \d+ bytes as JSON"):
        machine.update(instructions="y" * (21 * 1024 * 1024))
    with pytest.raises(ConfigurationError, match=r"^update: instructions cannot be sent"):
        machine.update(instructions=half_an_emoji)
    assert sent(protocol) == [] and machine.settings.instructions is None
    protocol.connection_lost()
    machine.connection_lost(0.1, 1006, "gone")
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    machine.restore(0.2)  # before, the kept text made this raise, and the session ended
    assert not any(e["type"] == "conversation.item.create" for e in sent(fresh))


def test_a_drop_while_a_tool_runs_leaves_the_create_to_its_output() -> None:
    """The reply's preamble is cut short by the drop while its tool runs: the restore sends no
    ``response.create`` of its own (the model would call the tool again); the output brings one."""
    machine, protocol, playout = machine_on_a_connection()
    call = {"id": "item_f", "object": "realtime.item", "type": "function_call", "status": "completed",
            "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
    receive(machine, protocol, reply_frames("item_a", 24_000) + [
        frame({"type": "response.output_item.added", "response_id": "resp_1", "output_index": 1,
               "item": {**call, "status": "in_progress", "arguments": ""}}),
        frame({"type": "conversation.item.added", "previous_item_id": "item_a",
               "item": {**call, "status": "in_progress", "arguments": ""}}),
        frame({"type": "response.function_call_arguments.done", "response_id": "resp_1", "item_id": "item_f",
               "output_index": 1, "call_id": "call_1", "name": "get_weather", "arguments": "{}"}),
        frame({"type": "conversation.item.done", "previous_item_id": "item_a", "item": call}),
        frame({"type": "response.done", "response": {"id": "resp_1", "object": "realtime.response",
                                                     "status": "completed", "output": [call]}}),
    ], 0.0)
    assert machine.calls.begin("call_1")  # the driver starts it
    sent(protocol)
    play(machine, playout, 0.3)  # the preamble is still playing
    protocol.connection_lost()
    lost = machine.connection_lost(0.3, 1006, "gone")
    assert lost.barge_in is not None  # cut short for the listener
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(0.4)
    out = sent(fresh)
    assert restored.resent_creates == 0 and not any(e["type"] == "response.create" for e in out)
    assert any(e["type"] == "conversation.item.create" and e["item"]["type"] == "function_call"  # type: ignore[index]
               for e in out)
    machine.calls.on_result("call_1", {"t": 21})
    machine.drain_tools()
    after = [e["type"] for e in sent(fresh)]
    assert after == ["conversation.item.create", "response.create"]  # the output, then the one create


def _webrtc_push_to_talk() -> tuple[SessionMachine, RealtimeProtocol]:
    machine = SessionMachine(SessionSettings(api_key="k", transport="webrtc", turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    return machine, protocol


def _speak(machine: SessionMachine, blocks: range, now: float) -> list[np.ndarray]:
    """20 ms blocks, each of its own value; those handed back for the call's media track."""
    to_track = []
    for k in blocks:
        _effects, pcm, _waits = machine.captured(np.full(480, k + 1, np.int16), now, media=True)
        if pcm is not None:
            to_track.append(pcm)
    return to_track


def _on_a_new_call(machine: SessionMachine, protocol: RealtimeProtocol, now: float
                   ) -> tuple[RealtimeProtocol, list[dict[str, object]], ConnectionRestored]:
    protocol.connection_lost()
    machine.connection_lost(now, 1006, "gone")
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 65_536  # a data channel that says nothing of its size
    machine.attach(fresh)
    restored = machine.restore(now + 0.5)
    return fresh, sent(fresh), restored


def _item_audio(events: list[dict[str, object]]) -> np.ndarray:
    parts = [np.frombuffer(base64.b64decode(e["item"]["content"][0]["audio"]), "<i2")  # type: ignore[index]
             for e in events if e["type"] == "conversation.item.create"]
    return np.concatenate(parts) if parts else np.zeros(0, np.int16)


def test_over_webrtc_a_push_to_talk_turn_released_while_away_is_sent_on_the_new_call_and_answered() -> None:
    """A call's track takes nothing said before it: the turn goes as user audio items, each small enough for the
    data channel, then the one response. Before, the turn was lost with the call."""
    machine, protocol = _webrtc_push_to_talk()
    machine.start_talking(0.0)
    sent(protocol)
    on_track = _speak(machine, range(0, 50), 0.5)  # one second on the old call's track
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    assert _speak(machine, range(50, 100), 1.5) == []  # another second while away
    assert machine.release_talking(2.0) and machine.commit_talking(2.0)[1] is False
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 65_536
    machine.attach(fresh)
    restored = machine.restore(2.5)
    out = sent(fresh)
    said = np.concatenate([np.full(480, k + 1, np.int16) for k in range(100)])
    assert len(on_track) == 50 and np.array_equal(_item_audio(out), said)
    assert all(len(text) <= 65_536 for text in fresh.data_to_send()) and max(len(json.dumps(e)) for e in out) <= 65_536
    assert sum(e["type"] == "conversation.item.create" for e in out) == 2  # two seconds: 24 192 samples an item
    assert [e["type"] for e in out if e["type"] != "conversation.item.create"] == ["response.create"]
    assert restored.resent_creates == 1 and restored.resent_audio_ms == pytest.approx(2000)
    # dropped again before the server echoed the items: they are the conversation's now, rebuilt once from the
    # journal's audio (before, they were lost, and the new call was asked to answer a turn it never got)
    _again, again, _restored = _on_a_new_call(machine, fresh, 3.0)
    assert np.array_equal(_item_audio(again), said)
    assert [e["type"] for e in again if e["type"] != "conversation.item.create"] == ["response.create"]


def test_over_webrtc_a_turn_held_across_a_drop_goes_on_on_the_new_call() -> None:
    machine, protocol = _webrtc_push_to_talk()
    machine.start_talking(0.0)
    sent(protocol)
    _speak(machine, range(0, 25), 0.3)
    fresh, out, _restored = _on_a_new_call(machine, protocol, 0.6)
    assert np.array_equal(_item_audio(out), np.concatenate([np.full(480, k + 1, np.int16) for k in range(25)]))
    assert not any(e["type"] in ("response.create", "input_audio_buffer.commit") for e in out)  # still talking
    assert len(_speak(machine, range(25, 40), 1.2)) == 15  # the rest of the turn on the new call's track
    assert machine.stop_talking(1.5)[1]
    assert [e["type"] for e in sent(fresh)] == ["input_audio_buffer.commit", "response.create"]


@pytest.mark.parametrize("transport", ["ws", "webrtc"])
def test_a_turn_let_go_while_away_and_the_next_one_begun_are_two_turns_on_the_new_connection(transport: str) -> None:
    """Held at the drop, let go while away, pressed again and held: the turn let go is whole and answered; the
    next one goes on and waits for its own release (before, both went as one turn answered half-said)."""
    webrtc = transport == "webrtc"
    machine = SessionMachine(SessionSettings(api_key="k", transport=transport, turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    machine.start_talking(0.0)
    machine.captured(np.full(24_000, 1, np.int16), 1.0, media=webrtc)  # turn 1 on the first connection
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    machine.captured(np.full(4_800, 1, np.int16), 1.2, media=webrtc)
    assert machine.release_talking(1.2) and not machine.commit_talking(1.2)[1]
    machine.start_talking(1.3)
    machine.captured(np.full(2_400, 2, np.int16), 1.4, media=webrtc)  # turn 2 begun, still held
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 65_536 if webrtc else fresh.max_event_bytes
    machine.attach(fresh)
    machine.restore(1.5)
    out = sent(fresh)
    kinds = [e["type"] for e in out]
    assert kinds.count("response.create") == 1
    before, after = out[:kinds.index("response.create")], out[kinds.index("response.create") + 1:]
    if webrtc:
        assert set(_item_audio(before).tolist()) == {1} and len(_item_audio(before)) == 28_800
        assert set(_item_audio(after).tolist()) == {2} and len(_item_audio(after)) == 2_400
    else:
        audio = [np.frombuffer(base64.b64decode(e["audio"]), "<i2") for e in out if e["type"] == "input_audio_buffer.append"]
        assert [e["type"] for e in before][-1] == "input_audio_buffer.commit"
        assert set(audio[0].tolist()) == {1} and len(audio[0]) == 28_800 and set(audio[1].tolist()) == {2}
        assert [e["type"] for e in after] == ["input_audio_buffer.append"]


def _webrtc_server_vad() -> tuple[SessionMachine, RealtimeProtocol]:
    machine = SessionMachine(SessionSettings(api_key="k", transport="webrtc"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    return machine, protocol


def _blocks(first: int, last: int) -> np.ndarray:
    """What :func:`_speak` sent of blocks ``first`` up to ``last`` (excluded)."""
    return np.concatenate([np.full(480, k + 1, np.int16) for k in range(first, last)])


def test_over_webrtc_with_server_vad_speech_under_way_at_a_drop_is_sent_on_the_new_call_and_answered() -> None:
    """The server's VAD heard the user begin (at 1 s on the old call's track) and the call dropped mid-sentence:
    the new call's track carries only what follows, so the speech so far goes as user audio items, from the
    track's margin before its start (the server's ``audio_start_ms`` has the padding in it already), and one
    response is asked for. Before, it was lost."""
    machine, protocol = _webrtc_server_vad()
    _speak(machine, range(0, 75), 0.0)  # 1.5 s on the old call's track
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 1000,
                                       "item_id": "item_u1"})], 1.3)
    protocol.connection_lost()
    machine.connection_lost(1.5, 1006, "gone")
    assert _speak(machine, range(75, 100), 1.8) == []  # half a second while away
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 65_536
    machine.attach(fresh)
    restored = machine.restore(2.0)
    out = sent(fresh)
    start = (1000 - 200) // 20  # the speech's start less the margin, in 20 ms blocks
    assert np.array_equal(_item_audio(out), _blocks(start, 100))
    assert [e["type"] for e in out if e["type"] != "conversation.item.create"] == ["response.create"]
    assert restored.resent_creates == 1 and restored.resent_audio_ms == pytest.approx((100 - start) * 20)
    # the new call counts its milliseconds from its own track: speech it hears at 200 ms is the 10th block after
    assert len(_speak(machine, range(100, 125), 2.5)) == 25
    receive(machine, fresh, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 200,
                                    "item_id": "item_u2"})], 2.6)
    _again, again, _restored = _on_a_new_call(machine, fresh, 2.7)
    # the items resent before, rebuilt, then the new speech from 0 ms (the margin reaches back further)
    assert np.array_equal(_item_audio(again), _blocks(start, 125))
    assert [e["type"] for e in again if e["type"] != "conversation.item.create"] == ["response.create"]


def test_after_a_drop_the_new_connections_milliseconds_begin_with_the_speech_resent() -> None:
    """The speech under way at a drop is appended again on the new connection, whose server counts its milliseconds
    from that audio: the figures place its ``speech_stopped`` where that was said. Before, the new connection's
    0 ms was taken for the first block captured after the restore, a second late."""
    machine = SessionMachine(SessionSettings(api_key="k", silence_ms=500, prefix_padding_ms=300), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    block = np.zeros(480, np.int16)
    for k in range(75):  # 1.5 s, block k captured by 0.02·(k + 1)
        machine.captured(block, 0.02 * (k + 1))
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 1000,
                                       "item_id": "item_u1"})], 1.3)
    protocol.connection_lost()
    machine.connection_lost(1.5, 1006, "gone")
    for k in range(75, 100):  # half a second while away
        machine.captured(block, 0.02 * (k + 1))
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(2.05)
    assert restored.resent_audio_ms == pytest.approx(1000)  # from 1.0 s, where the speech began, to 2.0 s
    for k in range(100, 150):
        machine.captured(block, 0.02 * (k + 1))
    receive(machine, fresh, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 0,
                                    "item_id": "item_u2"}),
                             frame({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1700,
                                    "item_id": "item_u2"})], 3.0)
    speech = machine.metrics.report(3.0).speech[-1]
    assert (speech.start, speech.end, speech.speech_end) == (pytest.approx(1.0), pytest.approx(2.7),
                                                             pytest.approx(2.2))


def test_the_last_chunk_sent_when_the_input_ends_is_placed_where_it_was_captured() -> None:
    """``input_ended`` sends what the chunker held; its samples were captured by the last block's end, not when the
    input's iterator finished (seconds later, after a recording's tail)."""
    machine = SessionMachine(SessionSettings(api_key="k", silence_ms=500, prefix_padding_ms=300,
                                             input_chunk_ms=40), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    for k in range(53):  # 1.06 s: the last block held by the 40 ms chunker
        machine.captured(np.zeros(480, np.int16), 0.02 * (k + 1))
    machine.input_ended(3.0)
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 500,
                                       "item_id": "item_u1"}),
                                frame({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1060,
                                       "item_id": "item_u1"})], 3.5)
    speech = machine.metrics.report(3.5).speech[-1]
    assert speech.end == pytest.approx(1.06)


def test_over_webrtc_with_server_vad_the_silence_the_track_filled_in_keeps_the_timelines_together() -> None:
    """The microphone fell a second behind the call's track, which sent silence meanwhile and the server counted it:
    the journal counts it too, so speech the server places after it is found where it was said. Before, the
    journal ran a second behind the server's milliseconds and the resent speech began a second late."""
    machine, protocol = _webrtc_server_vad()
    _speak(machine, range(0, 50), 0.0)  # 1 s
    machine.captured(np.full(480, 51, np.int16), 2.0, media=True, padded=24_000)  # after a second of filler
    _speak(machine, range(51, 100), 2.0)
    # speech at 2.2 s on the track's timeline: block 60 of what the microphone gave, after the filler
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 2200,
                                       "item_id": "item_u1"})], 2.5)
    _fresh, out, _restored = _on_a_new_call(machine, protocol, 3.0)
    # from 2200 − 200 ms on the track: where the filler ended, the first block the microphone gave after it
    assert np.array_equal(_item_audio(out), _blocks(50, 100))


def test_over_webrtc_the_figures_count_the_silence_the_track_filled_in() -> None:
    """The server counts the track's filler as input: its milliseconds after it fall where the microphone's next
    block was captured, not a second later."""
    machine, protocol = _webrtc_server_vad()
    block = np.zeros(480, np.int16)
    for k in range(50):  # 1 s, captured by 0.02·(k + 1)
        machine.captured(block, 0.02 * (k + 1), media=True)
    machine.captured(block, 2.02, media=True, padded=24_000)  # a second of filler first
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 2000,
                                       "item_id": "item_u1"}),
                                frame({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 2020,
                                       "item_id": "item_u1"})], 2.5)
    speech = machine.metrics.report(2.5).speech[-1]
    assert (speech.start, speech.end) == (pytest.approx(2.0), pytest.approx(2.02))


def test_over_webrtc_with_server_vad_nothing_is_resent_when_nobody_was_speaking() -> None:
    """Audio the server's VAD never took for speech is not sent as a user turn: an item of silence would be one."""
    machine, protocol = _webrtc_server_vad()
    _speak(machine, range(0, 50), 0.0)
    _fresh, out, restored = _on_a_new_call(machine, protocol, 1.0)
    assert not any(e["type"] in ("conversation.item.create", "response.create") for e in out)
    assert restored.resent_audio_ms == 0


def test_over_webrtc_with_server_vad_a_committed_turn_is_not_resent_and_its_answer_is_owed_once() -> None:
    machine, protocol = _webrtc_server_vad()
    _speak(machine, range(0, 75), 0.0)
    receive(machine, protocol, [
        frame({"type": "session.updated", "session": {"type": "realtime", "audio": {"input": {
            "turn_detection": {"type": "server_vad", "create_response": True}}}}}),
        frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 200, "item_id": "item_u1"}),
        frame({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1000, "item_id": "item_u1"}),
        frame({"type": "input_audio_buffer.committed", "previous_item_id": None, "item_id": "item_u1"}),
    ], 1.5)
    _fresh, out, restored = _on_a_new_call(machine, protocol, 1.5)
    assert [e["type"] for e in out].count("response.create") == 1 and restored.resent_creates == 1
    assert restored.resent_audio_ms == 0  # committed: the rebuild carries the turn, not the resend
    # with no transcript yet, the rebuilt turn is its audio: from where the server says it began to its end at 1 s
    assert np.array_equal(_item_audio(out), _blocks(10, 50))


def test_over_webrtc_a_small_data_channel_takes_the_turn_in_small_items() -> None:
    machine, protocol = _webrtc_push_to_talk()
    machine.start_talking(0.0)
    sent(protocol)
    _speak(machine, range(0, 50), 0.5)
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 4_096  # valid SDP may say so
    machine.attach(fresh)
    machine.restore(1.5)  # before, it raised and nothing went
    frames = fresh.data_to_send()
    assert all(len(text) <= 4_096 for text in frames)
    out = [json.loads(text) for text in frames]
    assert np.array_equal(_item_audio(out), np.concatenate([np.full(480, k + 1, np.int16) for k in range(50)]))


@pytest.mark.parametrize("transport", ["ws", "webrtc"])
def test_two_turns_let_go_while_away_stay_two_turns_with_one_answer(transport: str) -> None:
    """Let go, pressed, let go again while away, then pressed and held: before, the two turns went as one and
    two responses were owed, the second firing while the key was down."""
    webrtc = transport == "webrtc"
    machine = SessionMachine(SessionSettings(api_key="k", transport=transport, turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    machine.start_talking(0.0)
    protocol.connection_lost()
    machine.connection_lost(0.1, 1006, "gone")
    for n, now in ((1, 0.5), (2, 1.0)):
        machine.captured(np.full(4_800, n, np.int16), now, media=webrtc)
        assert machine.release_talking(now) and not machine.commit_talking(now)[1]
        machine.start_talking(now + 0.1)
    machine.captured(np.full(2_400, 3, np.int16), 1.5, media=webrtc)  # the third, still held
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(1.6)
    out = sent(fresh)
    assert restored.resent_creates == 1
    if webrtc:
        said = [set(np.frombuffer(base64.b64decode(e["item"]["content"][0]["audio"]), "<i2").tolist())
                if e["type"] == "conversation.item.create" else e["type"] for e in out]
        assert said == [{1}, {2}, "response.create", {3}]
    else:
        said = [set(np.frombuffer(base64.b64decode(e["audio"]), "<i2").tolist())
                if e["type"] == "input_audio_buffer.append" else e["type"] for e in out]
        assert said == [{1}, "input_audio_buffer.commit", {2}, "input_audio_buffer.commit", "response.create", {3}]


def _too_short(effects: object) -> list[SessionError]:
    return [e for e in effects.events if isinstance(e, SessionError) and e.code == "turn_too_short"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("transport", ["ws", "webrtc"])
def test_a_push_to_talk_tap_is_dropped_and_said_not_committed_and_answered(transport: str) -> None:
    """A press and release 40 ms apart: before, the commit was refused (``input_audio_buffer_commit_empty``) and
    the response asked with it answered nothing the user said. Now the buffer is cleared, nothing is asked, and
    the app is told. 100 ms is taken as a turn."""
    webrtc = transport == "webrtc"
    machine = SessionMachine(SessionSettings(api_key="k", transport=transport, turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    for n, blocks, answered in ((1, 2, False), (2, 5, True)):  # 40 ms, then 100 ms
        machine.start_talking(float(n))
        sent(protocol)
        for _ in range(blocks):
            machine.captured(np.full(480, n, np.int16), float(n), media=webrtc)
        effects, waiting = machine.stop_talking(float(n) + 0.1)
        kinds = [e["type"] for e in sent(protocol)]
        if answered:
            assert waiting and not _too_short(effects) and kinds[-2:] == ["input_audio_buffer.commit",
                                                                          "response.create"]
        else:
            assert waiting and [e.message for e in _too_short(effects)] == [
                "push-to-talk: a turn of 40 ms is too short to send (at least 100 ms of audio): it was dropped, and "
                "nothing was asked"]
            assert kinds[-1] == "input_audio_buffer.clear"  # what reached the server of it is gone too
            assert not {"input_audio_buffer.commit", "response.create"} & set(kinds)


@pytest.mark.parametrize("transport", ["ws", "webrtc"])
@pytest.mark.parametrize("tap_first", [False, True])
def test_a_tap_while_away_is_dropped_and_nothing_of_it_reaches_the_new_connection(transport: str,
                                                                                    tap_first: bool) -> None:
    """A turn let go while away and a tap, in either order: the tap is said at once and asks nothing, and the new
    connection gets the turn alone. Before, the tap's audio went too: as a turn of its own (refused), glued to the
    start of the next turn, or over WebRTC as a user audio item of noise in the conversation."""
    webrtc = transport == "webrtc"
    machine = SessionMachine(SessionSettings(api_key="k", transport=transport, turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    machine.start_talking(0.0)
    machine.stop_talking(0.0)
    protocol.connection_lost()
    machine.connection_lost(0.1, 1006, "gone")
    presses = [(960, 2), (4_800, 1)] if tap_first else [(4_800, 1), (960, 2)]
    for n, (samples, value) in enumerate(presses):
        machine.start_talking(0.5 + n)
        machine.captured(np.full(samples, value, np.int16), 0.6 + n, media=webrtc)
        assert len(_too_short(machine.stop_talking(0.7 + n)[0])) == (value == 2)
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 65_536 if webrtc else fresh.max_event_bytes
    machine.attach(fresh)
    restored = machine.restore(3.0)
    out = sent(fresh)
    assert restored.resent_creates == 1
    if webrtc:
        said = [np.frombuffer(base64.b64decode(e["item"]["content"][0]["audio"]), "<i2").tolist()  # type: ignore[index]
                if e["type"] == "conversation.item.create" else e["type"] for e in out]
    else:
        said = [np.frombuffer(base64.b64decode(e["audio"]), "<i2").tolist()  # type: ignore[arg-type]
                if e["type"] == "input_audio_buffer.append" else e["type"] for e in out]
    audio = [part for part in said if isinstance(part, list)]
    assert [k for k in said if isinstance(k, str)] == (
        ["response.create"] if webrtc else ["input_audio_buffer.commit", "response.create"])
    assert sum(audio, []) == [1] * 4_800


def test_a_sidebands_interrupt_cancels_and_clears_the_calls_output_buffer() -> None:
    """A sideband has no audio of its own: the call plays from the server's output buffer, which the sideband sees
    start and stop. Its interrupt cancels the response and clears that buffer, as the call's own side does, with no
    truncate (the server cuts at what it played). Before, it cancelled at most, and the caller went on hearing it."""
    machine = SessionMachine(SessionSettings(api_key="k", call_id="rtc_x"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    assert machine.interrupt(0.1) is NO_EFFECTS  # nothing playing on the call: nothing to stop
    receive(machine, protocol, [frame({"type": "output_audio_buffer.started", "response_id": "resp_1"})], 0.2)
    effects = machine.interrupt(0.5)
    assert effects.barge_in is not None and effects.barge_in.server_cuts
    assert [e["type"] for e in sent(protocol)] == ["output_audio_buffer.clear"]  # the response was already done
    receive(machine, protocol, [frame({"type": "output_audio_buffer.cleared", "response_id": "resp_1"})], 0.6)
    assert machine.interrupt(0.7) is NO_EFFECTS and sent(protocol) == []


def test_over_webrtc_with_server_vad_speech_no_item_could_carry_is_not_answered() -> None:
    """A data channel too small for even a sample of audio sends no turn, and so asks for no answer to one."""
    machine, protocol = _webrtc_server_vad()
    _speak(machine, range(0, 50), 0.0)
    receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started", "audio_start_ms": 500,
                                       "item_id": "item_u1"})], 1.0)
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = 200
    machine.attach(fresh)
    restored = machine.restore(1.5)
    assert sent(fresh) == [] and restored.resent_creates == 0 and restored.resent_audio_ms == 0


def test_a_websocket_session_takes_no_notice_of_a_call_buffer_it_has_not_got() -> None:
    """output_audio_buffer events belong to a call (WebRTC, SIP) and its sideband: sent to a WebSocket session by a
    confused or hostile server, they neither make it audible nor keep it from being idle."""
    machine, protocol, playout = machine_on_a_connection()
    receive(machine, protocol, [frame({"type": "output_audio_buffer.started", "response_id": "resp_1"})], 0.1)
    assert machine.interrupt(0.2) is NO_EFFECTS and sent(protocol) == []
    assert machine.idle(0.2, tools_busy=False)


def test_a_sidebands_drop_is_not_the_calls_and_a_new_attach_knows_nothing_of_its_buffer() -> None:
    machine = SessionMachine(SessionSettings(api_key="k", call_id="rtc_x"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    receive(machine, protocol, [frame({"type": "output_audio_buffer.started", "response_id": "resp_1"})], 0.2)
    protocol.connection_lost()
    lost = machine.connection_lost(0.5, 1006, "gone")
    assert lost.barge_in is None  # the caller goes on hearing what the server plays
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    assert machine.interrupt(0.6) is NO_EFFECTS  # nothing known to be playing until the call's events say so


def test_a_push_to_talk_turn_said_before_the_servers_cleared_came_back_is_resent_whole() -> None:
    """The press sends ``input_audio_buffer.clear``; its ``cleared`` comes a round trip later, and what the user
    said meanwhile is in the server's buffer. Before, the journal took the reply for the start of the turn, and a
    drop resent the turn without its first words."""
    machine, protocol = _webrtc_push_to_talk()
    _speak(machine, range(0, 5), 0.0)  # not talking: nothing goes out or is kept
    machine.start_talking(0.1)
    assert [e["type"] for e in sent(protocol)] == ["input_audio_buffer.clear"]
    _speak(machine, range(5, 15), 0.2)  # 200 ms before the reply
    receive(machine, protocol, [frame({"type": "input_audio_buffer.cleared"})], 0.3)
    _speak(machine, range(15, 35), 0.4)
    _fresh, out, _restored = _on_a_new_call(machine, protocol, 0.8)  # the key still held
    assert np.array_equal(_item_audio(out), _blocks(5, 35))


def test_a_clear_the_session_did_not_send_still_ends_what_came_before() -> None:
    """A ``cleared`` the session is owed no reply for (another client of the call cleared the buffer)."""
    machine, protocol = _webrtc_push_to_talk()
    machine.start_talking(0.0)
    receive(machine, protocol, [frame({"type": "input_audio_buffer.cleared"})], 0.05)  # the reply to the press
    _speak(machine, range(0, 10), 0.1)
    receive(machine, protocol, [frame({"type": "input_audio_buffer.cleared"})], 0.3)  # someone else's
    _speak(machine, range(10, 20), 0.4)
    _fresh, out, _restored = _on_a_new_call(machine, protocol, 0.8)
    assert np.array_equal(_item_audio(out), _blocks(10, 20))


def test_a_reply_the_users_barge_in_cut_is_not_asked_for_again_after_a_drop() -> None:
    """Server VAD: the user talked over the reply and the server cancels it itself; the connection drops before
    its ``response.done``. The user's turn goes on the new connection, whose VAD answers it: no create is owed.
    Before, the cut reply was taken as owed and a create went out while the user was still talking."""
    playout = PlayoutBuffer()
    machine = SessionMachine(SessionSettings(api_key="k"), playout)  # server VAD
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    receive(machine, protocol, [frame({"type": "session.updated", "session": {"type": "realtime", "audio": {
        "input": {"turn_detection": {"type": "server_vad", "create_response": True,
                                     "interrupt_response": True}}}}})], 0.0)
    receive(machine, protocol, reply_frames("item_a", 24_000), 0.0)
    play(machine, playout, 0.4)
    (effects,) = receive(machine, protocol, [frame({"type": "input_audio_buffer.speech_started",
                                                     "audio_start_ms": 200, "item_id": "item_u"})], 0.4)
    assert isinstance(effects.barge_in, BargeIn)
    sent(protocol)
    protocol.connection_lost()
    machine.connection_lost(0.6, 1006, "gone")
    fresh = RealtimeProtocol()
    machine.attach(fresh)
    restored = machine.restore(0.7)
    assert [e["type"] for e in sent(fresh)].count("response.create") == 0 and restored.resent_creates == 0
