"""The GPT-Live machine, sans-I/O: frames as plain lists, the playout read block by block as a listener would."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from voxline.base.clock import VirtualClock
from voxline.realtime.errors import ConfigurationError
from voxline.session.bargein import Trigger
from voxline.session.events import SpeechStarted, BargeIn, HeardTranscript, LiveDelivered, StateChanged, TranscriptDelta
from voxline.session.tools import ToolRegistry
from tests.support.live_rig import BLOCK, RATE, WORDS, Rig, frame, sent, start, track
from voxline.session.events import SessionError


def test_the_first_frame_is_session_start_and_commands_wait_for_session_started() -> None:
    rig = Rig(instructions="Be brief.")
    rig.machine.mute()
    first = start(rig)
    assert [e["type"] for e in first] == ["session.start"]
    assert first[0]["session"]["model"] == "gpt-live-1" and first[0]["session"]["delegation"] == {"type": "client"}
    assert [e["type"] for e in sent(rig.protocol)] == ["session.input_audio.mute"]  # released by session.started


@pytest.mark.parametrize("cut_at", [0.61, 1.0, 1.337, 1.9])
@pytest.mark.parametrize("trigger", ["user_speech", "interrupt", "local_vad"])
def test_a_cut_silences_at_once_and_tells_the_model_what_was_heard(cut_at: float, trigger: str) -> None:
    rig = Rig()
    start(rig)
    track(rig, [(0.5, 2.2)], 4.0)
    rig.play(cut_at)
    if trigger == "user_speech":
        events = rig.feed(frame(type="session.input_transcript.delta", event_id="u1", delta="wait",
                                start_ms=5000, end_ms=5200), rig.t)
    elif trigger == "interrupt":
        events = list(rig.machine.interrupt(rig.t, Trigger.INTERRUPT).events)
    else:
        events = list(rig.machine.local_speech(rig.t, rig.t - 0.05).events)
    barge = next(e for e in events if isinstance(e, BargeIn))
    rig.play(rig.t + 0.4)  # the model keeps streaming the utterance: the client drops it
    # the listener hears silence at once: nothing after the fade
    heard_samples = int(np.count_nonzero(rig.heard))
    assert not rig.heard[int(barge.at * RATE) + int(0.006 * RATE):].any()
    assert rig.playout.queued_samples == 0
    # what the session told the model is what the listener heard, to within one 20 ms block
    told = [e for e in sent(rig.protocol) if e["type"] == "session.instructions.append"]
    assert len(told) == 1
    at_ms = float(re.search(r"at (\d+) ms on the session timeline", str(told[0]["content"])).group(1))
    truth_ms = 500 + heard_samples * 1000 / RATE  # the utterance starts 500 ms into the track
    assert abs(at_ms - truth_ms) <= 20
    heard_words = [w for i, w in enumerate(WORDS) if 500 + 200 * (i + 1) <= truth_ms]
    delivered = next(e for e in events if isinstance(e, LiveDelivered))
    assert delivered.content == told[0]["content"]
    said = delivered.heard_text.split()
    assert said == heard_words  # whole words the listener heard to their end
    assert f'heard only: "{delivered.heard_text.strip()}"' in told[0]["content"]
    heard_event = next(e for e in events if isinstance(e, HeardTranscript))
    assert heard_event.text == delivered.heard_text and heard_event.item_id == barge.item_id


def test_a_reply_heard_to_its_end_is_reported_whole_and_nothing_is_appended() -> None:
    rig = Rig()
    start(rig)
    track(rig, [(0.2, 2.2)], 4.0)
    events = rig.play(4.0) + rig.events
    heard = [e for e in events if isinstance(e, HeardTranscript)]
    assert len(heard) == 1 and heard[0].text == heard[0].full_text == " ".join(WORDS) and not heard[0].estimate
    assert [e.state for e in events if isinstance(e, StateChanged)] == ["speaking", "listening"]
    assert sent(rig.protocol) == []


def test_a_pause_opens_a_new_utterance_and_a_cut_one_stays_silent_only_to_its_end() -> None:
    rig = Rig()
    start(rig)
    track(rig, [(0.1, 1.0), (2.0, 0.6)], 3.0, lead=0.2)
    rig.play(0.4)
    first = rig.machine.interrupt(rig.t).barge_in
    assert first is not None
    rig.play(1.7)
    assert not any(k[0].startswith("live_utt") for k in rig.playout.queued_parts())  # the rest of the cut one: dropped
    assert not rig.heard[int(0.41 * RATE):int(1.75 * RATE)].any()  # the next one arrives 0.2 s early
    rig.play(2.1)
    second = rig.machine.timeline.current
    assert second is not None and second.uid != first.item_id and rig.heard[int(1.85 * RATE):].any()


def test_tools_of_the_delegated_backend_run_once_per_call_and_continue_once() -> None:
    registry = ToolRegistry()

    @registry.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    rig = Rig(registry)
    first = start(rig)
    delegation = first[0]["session"]["delegation"]
    assert delegation["type"] == "responses" and delegation["responses"]["tools"][0]["name"] == "weather"
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
            "arguments": '{"city": "Paris"}', "status": "completed"}

    def envelope(event: dict[str, object], i: int) -> str:
        return frame(type="response.event", event_id=f"r{i}", delegation_id="del_1", event=event)

    rig.feed(envelope({"type": "response.created", "response": {"id": "resp_1"}}, 0), 0.1)
    calls = []
    for i in range(2):  # the same call announced twice runs once
        rig.protocol.receive(envelope({"type": "response.output_item.done", "item": item}, i + 1))
        for output in rig.protocol.events():
            calls.extend(rig.machine.receive(output, 0.1).calls)
    assert [c.call_id for c in calls] == ["call_1"]
    rig.feed(envelope({"type": "response.completed", "response": {"id": "resp_1"}}, 5), 0.2)
    assert rig.machine.calls.begin("call_1")
    rig.machine.calls.on_result("call_1", "sunny in Paris")
    rig.machine.drain_tools()
    out = sent(rig.protocol)
    assert [e["type"] for e in out] == ["response.item.create", "response.create"]
    assert out[0]["item"] == {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"}
    rig.machine.drain_tools()
    assert sent(rig.protocol) == []


def test_user_text_and_fixed_settings_are_one_line_errors() -> None:

    rig = Rig()
    start(rig)
    with pytest.raises(ConfigurationError, match="no user text"):
        rig.machine.send_text("hi")
    with pytest.raises(ConfigurationError, match="fixed"):
        rig.machine.update(instructions="x")


def test_a_malformed_frame_is_a_session_error_not_an_exception() -> None:
    rig = Rig()
    start(rig)
    from voxline.session.events import SessionError

    events = rig.feed("{not json", 0.1) + rig.feed(frame(type="session.output_audio.delta", delta="@@@"), 0.1)
    assert [type(e) for e in events] == [SessionError, SessionError]


def test_words_said_after_the_microphone_was_gone_are_placed_where_they_were_captured() -> None:
    """The session's timeline runs with the caller's audio: while the microphone stream was down for 12 s it stood
    still, and words it places after that were said 12 s later than its milliseconds alone would say."""
    rig = Rig()
    start(rig)
    block = np.zeros(BLOCK, np.int16)
    for k in range(50):  # 1 s, captured by 0.02·(k + 1)
        rig.machine.captured(block, 0.02 * (k + 1))
    for k in range(50):  # the stream back at 13 s
        rig.machine.captured(block, 13.0 + 0.02 * (k + 1))
    rig.machine.input_ended(14.0)
    rig.feed(frame(type="session.input_transcript.delta", event_id="u", delta="hello", start_ms=1200,
                   end_ms=1500), 14.0)
    (speech,) = rig.machine.metrics.report(14.0).speech
    assert (speech.start, speech.end) == (pytest.approx(13.2), pytest.approx(13.5))


def test_transcript_deltas_are_session_events() -> None:
    rig = Rig()
    start(rig)
    events = rig.feed(frame(type="session.input_transcript.delta", event_id="u", delta="hello", start_ms=0,
                            end_ms=400), 0.5)
    assert events == [SpeechStarted(0.5, "live_user0", 0), TranscriptDelta("user", "live_user0", "hello", 0.5)]


def test_over_webrtc_the_media_track_is_the_same_track() -> None:
    rig = Rig()
    rig.protocol.started = True  # the POST started it: no session.start
    silence = np.zeros(2400, np.int16)
    voice = np.full(2400, 1500, np.int16)
    for block in (silence, silence, voice, voice, silence):
        rig.machine.track_audio(block)
    utt = rig.machine.timeline.current
    assert utt is not None and utt.origin == 4800  # 200 ms into the track: its place on the timeline
    assert rig.playout.received_samples(utt.uid, 0) == 3 * 2400  # the utterance and the silence after it so far
    rig.play(0.4)
    events = list(rig.machine.interrupt(rig.t).events)
    delivered = next(e for e in events if isinstance(e, LiveDelivered))
    assert delivered.at_ms is not None and abs(delivered.at_ms - (200 + rig.machine.timeline.heard(
        utt.uid, rig.playout.heard_samples(utt.uid, 0, float("inf"))).heard_ms)) < 1


def test_over_webrtc_the_tracks_rtp_clock_places_it_on_the_timeline_across_lost_packets() -> None:
    from voxline.realtime.transports.rtc_audio import RemoteAudioDecoder, audio_frame

    rig = Rig()
    rig.protocol.started = True
    track = np.concatenate([np.zeros(RATE, np.int16), np.full(2 * RATE, 1500, np.int16)])  # the reply at 1000 ms
    clock = VirtualClock()
    frames = [(i / RATE, audio_frame(track[i:i + BLOCK], i)) for i in range(0, track.size, BLOCK)]  # as they came
    del frames[30:40]  # 200 ms of packets lost before the reply
    decoder = RemoteAudioDecoder(clock)
    for at, f in frames:
        clock.advance_to(at)
        rig.machine.track_audio(decoder.decode(f))
    words = [(1000, 1400, "Paris"), (1400, 1800, " is"), (1800, 2200, " sunny"), (2200, 3000, " today.")]
    for start_ms, end_ms, text in words:
        rig.feed(frame(type="session.output_transcript.delta", event_id=f"w{start_ms}", delta=text,
                       start_ms=start_ms, end_ms=end_ms), 0.0)
    utt = rig.machine.timeline.utterances["live_utt00001"]
    assert utt.origin == RATE  # where the server said it starts, not 200 ms earlier
    rig.play(2.25)  # the lost packets' time is played as silence: the reply reaches the listener at 1000 ms
    events = rig.machine.interrupt(rig.t).events
    barge = next(e for e in events if isinstance(e, BargeIn))
    delivered = next(e for e in events if isinstance(e, LiveDelivered))
    assert barge.heard_ms == pytest.approx(rig.t * 1000 - 1000, abs=1)
    assert delivered.at_ms == pytest.approx(1000 + barge.heard_ms) and delivered.heard_text.strip() == "Paris is sunny"


def test_the_apps_live_commands_are_the_sdks_events() -> None:
    from voxline.realtime.errors import ConfigurationError

    rig = Rig()
    start(rig)
    rig.machine.play_fixture(np.full(2400, 100, np.int16))
    rig.machine.append("Silent progress.", kind="thinking")
    rig.machine.append("The order shipped.", kind="commentary", delegation_id="del_1")
    rig.machine.mute()
    rig.machine.unmute()
    rig.machine.close_session()
    out = sent(rig.protocol)
    assert [e["type"] for e in out] == ["session.output_audio.fixture.play", "session.thinking.append",
                                        "session.commentary.append", "session.input_audio.mute",
                                        "session.input_audio.unmute", "session.close"]
    assert base64.b64decode(out[0]["audio"]) == np.full(2400, 100, "<i2").tobytes()
    assert out[1]["delegation_id"] is None and out[2]["delegation_id"] == "del_1"
    with pytest.raises(ConfigurationError, match="kind"):
        rig.machine.append("x", kind="shout")


def test_a_delegation_to_the_app_is_an_event_for_it() -> None:
    from voxline.session.events import LiveDelegationRequested

    rig = Rig()
    start(rig)
    events = rig.feed(frame(type="session.delegation.created", event_id="d", offset_ms=1200,
                            delegation={"id": "del_9", "target": "client", "type": "delegation"}), 1.0)
    assert events == [LiveDelegationRequested("del_9", 1200, 1.0)]


def _two_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return city

    @registry.tool
    def time_in(city: str) -> str:
        """The time in a city."""
        return city

    return registry


def test_offering_other_tools_is_a_session_update_of_the_delegation() -> None:
    registry = _two_tools()

    rig = Rig(registry)
    start(rig)
    assert rig.machine.update(tools=["time_in"])
    (update,) = sent(rig.protocol)
    assert update["type"] == "session.update"
    assert [t["name"] for t in update["session"]["delegation"]["responses"]["tools"]] == ["time_in"]


def test_the_tools_offered_last_are_the_ones_a_new_connection_starts_with() -> None:
    """After a drop the next session.start offered every tool of the registry again, while the session (and its tool
    runner) kept only the ones update() chose: the model could call tools the runner then refused."""
    from voxline.realtime.live.protocol import LiveProtocol

    registry = _two_tools()

    rig = Rig(registry)
    first = start(rig)
    assert [t["name"] for t in first[0]["session"]["delegation"]["responses"]["tools"]] == ["weather", "time_in"]
    assert rig.machine.update(tools=["time_in"]) and rig.machine.offered_tools == ["time_in"]
    rig.machine.connection_lost(rig.t, 1006, "dropped")
    again = LiveProtocol()
    rig.machine.configure(again)
    [restart] = sent(again)
    assert restart["type"] == "session.start"
    assert [t["name"] for t in restart["session"]["delegation"]["responses"]["tools"]] == ["time_in"]


def test_appends_and_fixtures_of_the_wrong_kind_are_one_line_errors() -> None:
    rig = Rig()
    start(rig)
    for content, match in ((None, "append takes the content as a string, not NoneType"),
                           (123, "append takes the content as a string, not int"),
                           ("caf\ud83d", "append: content")):
        with pytest.raises(ConfigurationError, match=f"^{match}"):
            rig.machine.append(content)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="^delegation_id takes a string or None, not int$"):
        rig.machine.append("x", delegation_id=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^play_fixture takes a 1-D int16 array .*, not float32"):
        rig.machine.play_fixture(np.zeros(2400, np.float32))  # audio in [-1, 1] cast to int16 would be silence
    assert sent(rig.protocol) == []


def _dropped_and_restored(rig: Rig, between: object = None, *, lost_before_start: int = 0) -> list[dict[str, object]]:
    """Drop the rig's connection, call ``between`` (the app acting while away), open a new session and restore it
    in the driver's order (configure, attach, restore, then the server's session.started); ``lost_before_start``
    new connections are lost before their session started. What the session that started was sent after its
    start."""
    from voxline.realtime.live.protocol import LiveProtocol

    rig.protocol.connection_lost()
    rig.machine.connection_lost(1.0, 1006, "gone")
    if callable(between):
        between()
    for attempt in range(lost_before_start + 1):
        fresh = LiveProtocol()
        rig.machine.configure(fresh)
        rig.machine.attach(fresh)
        rig.protocol = fresh
        rig.machine.restore(1.5)
        if attempt < lost_before_start:
            if callable(between):
                between()  # the app goes on while the new connection waits for its start
            fresh.connection_lost()
            rig.machine.connection_lost(1.6, 1006, "lost again before its session started")
    events = rig.feed(frame(type="session.started", event_id="e1", session={
        "id": "sess_2", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), 1.5)
    assert not [e for e in events if isinstance(e, SessionError)], events
    out = sent(fresh)
    assert out[0]["type"] == "session.start"
    return out[1:]


def test_a_muted_input_stays_muted_on_the_session_after_a_drop() -> None:
    """A new session starts unmuted: the model heard the microphone again, though the app had muted it."""
    rig = Rig()
    start(rig)
    rig.machine.mute()
    assert [e["type"] for e in sent(rig.protocol)] == ["session.input_audio.mute"]
    assert [e["type"] for e in _dropped_and_restored(rig)] == ["session.input_audio.mute"]
    rig.machine.unmute()
    assert [e["type"] for e in sent(rig.protocol)] == ["session.input_audio.unmute"]
    assert _dropped_and_restored(rig) == []  # a new session starts unmuted: nothing to say


def test_commands_given_while_the_connection_is_replaced_reach_the_next_session_in_order() -> None:
    """They went into the lost connection's outbox, and were thrown away with it, their ids handed back."""
    rig = Rig()
    start(rig)
    ids: list[str] = []

    def away() -> None:
        ids.append(rig.machine.append("The customer is a member.", kind="instructions"))
        rig.machine.mute()
        ids.append(rig.machine.append("Checking the order.", kind="thinking"))
        with pytest.raises(ConfigurationError, match="delegation 'deleg_1' was the lost session's"):
            rig.machine.append("It shipped.", kind="commentary", delegation_id="deleg_1")

    out = _dropped_and_restored(rig, away)
    assert [(e["type"], e.get("content")) for e in out] == [
        ("session.input_audio.mute", None),
        ("session.instructions.append", "The customer is a member."),
        ("session.thinking.append", "Checking the order."),
    ]
    assert [e["event_id"] for e in out[1:]] == ids  # the ids the app was given are the ones sent


def test_commands_kept_while_away_survive_a_new_connection_lost_before_its_session_started() -> None:
    """They went into the first new connection, held there for its session.started; lost before it came, they
    were thrown away with it, their ids handed back."""
    rig = Rig()
    start(rig)
    rig.machine.mute()
    sent(rig.protocol)
    said: list[str] = []

    def away() -> None:
        said.append(f"note {len(said)}")
        rig.machine.append(said[-1], kind="instructions")

    out = _dropped_and_restored(rig, away, lost_before_start=2)
    assert [(e["type"], e.get("content")) for e in out] == [
        ("session.input_audio.mute", None), *[("session.instructions.append", text) for text in said]]
    assert said == ["note 0", "note 1", "note 2"]


def test_commands_waiting_for_a_session_to_start_are_bounded_and_none_is_lost() -> None:
    """While away and while the new connection waits for its start, 256 commands wait in all; the next one is
    refused in one line (the queue grew without bound while a new connection was attached), and none of the 256
    is lost when that connection is lost before its start too."""
    from voxline.realtime.live.protocol import LiveProtocol
    from voxline.session.live.carrier import MAX_KEPT_AWAY

    rig = Rig()
    start(rig)
    rig.protocol.connection_lost()
    rig.machine.connection_lost(1.0, 1006, "gone")
    given = [rig.machine.append(f"away {k}") for k in range(MAX_KEPT_AWAY // 2)]
    fresh = LiveProtocol()
    rig.machine.configure(fresh)
    rig.machine.attach(fresh)
    given += [rig.machine.append(f"held {k}") for k in range(MAX_KEPT_AWAY - len(given))]
    with pytest.raises(ConfigurationError, match=f"^{MAX_KEPT_AWAY} commands wait for a session that has not "
                                                 "started; wait until it listens"):
        rig.machine.append("one too many")
    fresh.connection_lost()
    rig.machine.connection_lost(1.2, 1006, "lost before its start")
    with pytest.raises(ConfigurationError, match="commands wait for a session that has not started"):
        rig.machine.append("one too many, away")
    rig.protocol = last = LiveProtocol()
    rig.machine.configure(last)
    rig.machine.attach(last)
    rig.feed(frame(type="session.started", event_id="e1", session={
        "id": "sess_3", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), 1.5)
    out = [e for e in sent(last) if e["type"] == "session.instructions.append"]
    assert [e["event_id"] for e in out] == given
    rig.machine.append("once started, no bound but the wire's")
    assert [e["content"] for e in sent(last)] == ["once started, no bound but the wire's"]


def test_commands_before_the_first_session_started_are_bounded_too() -> None:
    """The first connection's protocol held every command given before its session.started, without bound."""
    from voxline.session.live.carrier import MAX_KEPT_AWAY

    rig = Rig()
    for k in range(MAX_KEPT_AWAY):
        rig.machine.append(f"early {k}")
    with pytest.raises(ConfigurationError, match="commands wait for a session that has not started"):
        rig.machine.append("one too many")
    assert rig.protocol.holding == MAX_KEPT_AWAY


def test_mute_and_unmute_while_a_new_connection_waits_leave_the_last_word() -> None:
    """The state the app left is what each new session is told, once, before the commands kept for it."""
    def toggled() -> None:
        rig.machine.mute()
        rig.machine.append("between", kind="thinking")
        rig.machine.unmute()
        rig.machine.mute()

    rig = Rig()
    start(rig)
    out = _dropped_and_restored(rig, toggled, lost_before_start=1)
    mutes = [e["type"] for e in out if e["type"].startswith("session.input_audio.")]
    # the last connection: muted again at attach, then what the app did while it waited, in order
    assert mutes[0] == "session.input_audio.mute" and mutes[-1] == "session.input_audio.mute", out
    assert [e["content"] for e in out if e["type"] == "session.thinking.append"] == ["between", "between"]


def test_a_late_refusal_of_the_start_does_not_end_a_session_that_started() -> None:
    rig = Rig()
    [first] = start(rig)
    events = rig.feed(frame(type="error", event_id="e9", error={"type": "invalid_request_error", "code": "x",
                                                                "message": "late", "client_event_id": first["event_id"]}), 1.0)
    errors = [e for e in events if isinstance(e, SessionError)]
    assert errors and not any(e.fatal for e in errors), events


def test_a_time_on_a_primary_audio_delta_does_not_move_the_track() -> None:
    """Primary deltas carry no times (the track is the timeline); one claiming 27 hours ahead was taken: its
    utterance stretched past any end, was never finished, and such utterances piled up."""
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(2400) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1

    def delta(samples: np.ndarray, **times: int) -> str:
        return frame(type="session.output_audio.delta",
                     delta=base64.b64encode(samples.astype("<i2").tobytes()).decode(), **times)

    rig.feed(delta(tone), 0.0)
    rig.feed(delta(tone, start_ms=100_000_000, end_ms=100_000_100), 0.0)
    for _ in range(20):
        rig.feed(delta(np.zeros(2400, np.int16)), 0.0)
    rig.play(5.0)
    [utt] = rig.machine.timeline.utterances.values()
    assert utt.closed and utt.origin == 0 and utt.received <= 22 * 2400


def test_an_utterance_already_cut_is_not_cut_again_while_its_fade_plays() -> None:
    """Stop pressed twice, or on ConnectionLost after the drop cut the reply: the fade of the first cut still
    plays, and the second finds nothing to stop (as on Realtime), with one note to the model, not two."""
    rig = Rig()
    start(rig)
    track(rig, [(0.5, 2.2)], 4.0)
    rig.play(1.22)  # the block from 1.2 s was read at 1.2 s: the cut's fade in it plays out
    first = rig.machine.interrupt(1.21, Trigger.INTERRUPT)
    again = rig.machine.interrupt(1.212, Trigger.INTERRUPT)  # within the cut's 5 ms fade
    spoken_over = rig.machine.local_speech(1.213, 1.212)
    assert first.barge_in is not None and again.barge_in is None and spoken_over.barge_in is None
    assert [e["type"] for e in sent(rig.protocol)] == ["session.instructions.append"]

    dropped = Rig()
    start(dropped)
    track(dropped, [(0.5, 2.2)], 4.0)
    dropped.play(1.22)
    dropped.protocol.connection_lost()
    lost = dropped.machine.connection_lost(1.21, 1006, "gone")
    assert [type(e).__name__ for e in lost.events if isinstance(e, BargeIn)] == ["BargeIn"]
    assert dropped.machine.interrupt(1.212, Trigger.INTERRUPT).barge_in is None


def test_a_delegation_a_drop_lost_cannot_be_answered_into_the_next_session() -> None:
    """Delegations in flight are lost on a drop: an answer to one, given once the next session started, would go
    to a session that never asked (the server refuses it, and the answer is lost): it is refused at the call."""
    rig = Rig()
    start(rig)
    rig.feed(frame(type="session.delegation.created", event_id="d", offset_ms=1200,
                   delegation={"id": "del_9", "target": "client", "type": "delegation"}), 1.0)
    _dropped_and_restored(rig)
    with pytest.raises(ConfigurationError, match="delegation 'del_9' was asked for by a session a dropped connection lost"):
        rig.machine.append("It is sunny.", kind="commentary", delegation_id="del_9")
    rig.feed(frame(type="session.delegation.created", event_id="d2", offset_ms=2200,
                   delegation={"id": "del_10", "target": "client", "type": "delegation"}), 2.0)
    rig.machine.append("It is sunny.", kind="commentary", delegation_id="del_10")  # the new session's own
    assert [e.get("delegation_id") for e in sent(rig.protocol)][-1] == "del_10"


def test_a_session_the_server_ended_is_idle_once_its_audio_played() -> None:
    """Closed at the app's request (or for its content) and its socket gone: no reconnect comes, nothing is owed.
    Before, it was never idle again, and a replay waited out its whole tail."""
    rig = Rig()
    start(rig)
    rig.feed(frame(type="session.closed", event_id="c", reason="close_requested", usage={"seconds": 1.0},
                   session={"id": "sess_1", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "closed"}),
             1.0)
    rig.protocol.connection_lost()
    rig.machine.connection_lost(1.1, 1000, "closed")
    assert rig.machine.ended and rig.machine.idle(1.2, tools_busy=False)
