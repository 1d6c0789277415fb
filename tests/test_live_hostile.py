"""A GPT-Live session against what a server may send: values off the timeline, frames nested too
deeply, late transcripts, errors naming no command, drops after drops and hours of replies."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.support.live_rig import BLOCK, RATE, SESSION, Rig, audio_delta, frame, sent, start, track
from voxline.realtime.errors import ConfigurationError, RemoteProtocolError
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveProtocol
from voxline.session.events import BargeIn, HeardTranscript, SessionError, SpeechStarted, StateChanged
from voxline.session.live.history import MAX_MESSAGES
from voxline.session.live.playback import KEEP_UTTERANCES
from voxline.session.live.timeline import MAX_TEXTS
from voxline.session.live.metrics import KEEP
from voxline.session.tools import ToolRegistry

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("text", [
    frame(type="session.output_transcript.delta", event_id="e", delta="x", start_ms=0, end_ms=10**400),
    frame(type="session.input_transcript.delta", event_id="e", delta="x", start_ms=-5, end_ms=10),
    frame(type="session.output_audio.delta", delta="AAAA", start_ms=lv.MAX_TIMELINE_MS + 1),
    frame(type="session.delegation.created", event_id="e", delegation={"id": "d", "target": "client"},
          offset_ms=10**30),
    DEEP,
    '{"type":"session.output_transcript.delta","deep":' + "[" * 900 + '"\\ud83d"' + "]" * 900 + "}",
])
def test_a_value_off_the_timeline_or_a_frame_nested_too_deeply_is_a_one_line_error(text: str) -> None:
    with pytest.raises(RemoteProtocolError) as exc:
        lv.parse_live_server(text)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 200


def test_a_huge_time_inside_a_playing_utterance_is_an_error_and_the_session_plays_on() -> None:
    rig = Rig()
    start(rig)
    track(rig, [(0.2, 1.0), (2.0, 1.0)], 4.0)
    rig.play(0.5)
    events = rig.feed(frame(type="session.output_transcript.delta", event_id="x", delta=" boom", start_ms=300,
                            end_ms=10**400), rig.t)
    assert [(e.code, e.fatal) for e in events if isinstance(e, SessionError)] == [("malformed_event", False)]
    events = rig.play(4.0)  # every tick goes through; the second reply plays and is reported whole
    assert len([e for e in events + rig.events if isinstance(e, HeardTranscript)]) == 2
    assert rig.heard[int(2.1 * RATE):int(2.9 * RATE)].all()


@pytest.mark.parametrize(("start_ms", "end_ms", "error"), [
    (999_999, 1_000_000, "ignored the times of a user transcript delta: 999999 ms on the session timeline is past "
                         "the 500 ms of audio the session has had"),
    (9_000, 100, "end_ms 100 is before start_ms 9000")])
def test_user_words_placed_where_no_audio_was_are_an_error_and_stay_out_of_the_figures(
        start_ms: int, end_ms: int, error: str) -> None:
    """Words the server places 16 minutes into a session half a second old: before, the turn's figures read
    "reply heard -998680 ms after your voice ended"; a delta ending before it starts was taken as well."""
    rig = Rig()
    start(rig)
    for k in range(25):
        rig.machine.captured(np.zeros(BLOCK, np.int16), 0.02 * (k + 1))
    rig.play(0.5)
    events = rig.feed(frame(type="session.input_transcript.delta", event_id="u", delta="future", start_ms=start_ms,
                            end_ms=end_ms), rig.t)
    (message,) = [e.message for e in events if isinstance(e, SessionError)]
    assert error in message and "\n" not in message
    assert not [e for e in events if isinstance(e, SpeechStarted)]
    track(rig, [(0.6, 0.4)], 2.0)
    rig.play(2.0)
    turns = rig.machine.report(rig.t).turns
    assert all(t.speech_end_at is None and t.reply_latency_ms is None for t in turns), turns


def test_a_reply_that_runs_dry_mid_sentence_stays_speaking() -> None:
    """60 ms of a reply arrive late: the listener hears a gap, but the assistant did not stop talking. Before, the
    state went to listening and back to speaking within the sentence, and a UI driven by it flickered."""
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(RATE) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1
    states = rig.feed(audio_delta(tone[:7200]), rig.t)
    states += rig.play(0.36)  # 300 ms heard, then 60 ms of nothing
    states += rig.feed(audio_delta(tone[7200:14400]), rig.t)
    states += rig.play(0.7)
    assert [e.state for e in states if isinstance(e, StateChanged)] == ["speaking"]
    states = rig.feed(audio_delta(np.zeros(RATE, np.int16)), rig.t) + rig.play(1.8)  # the silence that ends it
    assert [e.state for e in states if isinstance(e, StateChanged)] == ["listening"]


def test_a_reply_that_ran_dry_is_stopped_by_an_interrupt_and_the_rest_of_it_stays_silent() -> None:
    """Speaking is what a stop button stops: in the gap, interrupt() found nothing playing or queued and did
    nothing, and the rest of the reply played when it came."""
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(RATE) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1
    rig.feed(audio_delta(tone[:7200]), rig.t)
    rig.play(0.36)
    effects = rig.machine.interrupt(rig.t)
    assert effects.barge_in is not None and effects.barge_in.heard_ms == pytest.approx(300, abs=1)
    assert [e.text for e in effects.events if isinstance(e, HeardTranscript)] == [""]
    heard = len(rig.heard)
    rig.feed(audio_delta(tone[7200:14400]), rig.t)  # the rest of the sentence arrives
    rig.play(0.8)
    assert not rig.heard[heard:].any()


def test_an_error_naming_no_command_is_reported_once() -> None:
    rig = Rig()
    start(rig)
    events = rig.feed(frame(type="error", event_id="e1", error={"type": "x", "code": "c", "message": "m"}), 0.1)
    assert [(e.code, e.message) for e in events if isinstance(e, SessionError)] == [("c", "m")]
    rig.machine.mute()
    mute = sent(rig.protocol)[-1]
    events = rig.feed(frame(type="error", event_id="e2", error={"type": "x", "code": "c", "message": "no",
                                                                "client_event_id": mute["event_id"]}), 0.2)
    assert [e.message for e in events if isinstance(e, SessionError)] == ["session.input_audio.mute failed: no"]


@pytest.mark.parametrize(("start_ms", "end_ms", "cuts"), [
    (0, 900, False),  # the user's turn, which ended before the reply began: its transcript came late
    (800, 1400, True),  # words reaching into the reply
])
def test_only_words_reaching_into_the_reply_cut_it(start_ms: int, end_ms: int, cuts: bool) -> None:
    rig = Rig()
    start(rig)
    track(rig, [(1.0, 2.0)], 4.0)  # the reply lies at 1.0-3.0 s on the timeline
    rig.play(1.6)
    events = rig.feed(frame(type="session.input_transcript.delta", event_id="u", delta="What time is the tour?",
                            start_ms=start_ms, end_ms=end_ms), rig.t)
    assert any(isinstance(e, BargeIn) for e in events) is cuts
    rig.play(4.0)
    assert bool(rig.heard[int(1.0 * RATE):int(3.0 * RATE)].all()) is not cuts  # heard whole unless cut


def _drop_and_reconnect(rig: Rig) -> list[dict[str, object]]:
    """The connection drops; the session starts a new one (no store): what it sends first."""
    rig.machine.connection_lost(rig.t, 1006, "dropped")
    protocol = LiveProtocol()
    rig.machine.configure(protocol)
    rig.machine.attach(protocol)
    rig.protocol = protocol
    first = sent(protocol)
    rig.feed(frame(type="session.started", event_id="s2", session={
        "id": f"sess_{rig.t}", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), rig.t)
    return first


def _turn(rig: Rig, asked: str, at_s: float, reply_s: float = 1.0) -> None:
    """The user asks (transcribed at once), then a reply of ``reply_s`` plays whole."""
    base = int(rig.t * 1000)
    rig.feed(frame(type="session.input_transcript.delta", event_id=f"u{base}", delta=asked,
                   start_ms=base, end_ms=base + 300), rig.t)
    track_start = rig.t + at_s
    track(rig, [(track_start, reply_s)], track_start + reply_s + 0.8, lead=0.0)
    rig.play(track_start + reply_s + 0.8)


def test_after_drops_a_new_session_gets_every_users_words_and_every_heard_reply() -> None:
    rig = Rig()
    start(rig)
    _turn(rig, "What time is the tour?", 0.5)
    first = _drop_and_reconnect(rig)
    history = first[0]["session"]["input"]  # type: ignore[index]
    assert [(m["role"], m["content"][0]["text"]) for m in history] == [
        ("user", "What time is the tour?"), ("assistant", "Paris is sunny today with")]
    # the new connection's timeline starts again at zero; a jump far ahead on it forgets nothing
    rig.feed(frame(type="session.input_transcript.delta", event_id="j", delta="ok", start_ms=700_000,
                   end_ms=700_100), rig.t)
    second = _drop_and_reconnect(rig)
    history = second[0]["session"]["input"]  # type: ignore[index]
    assert [(m["role"], m["content"][0]["text"]) for m in history] == [
        ("user", "What time is the tour?"), ("assistant", "Paris is sunny today with"), ("user", "ok")]


def test_half_a_character_from_the_server_is_told_to_the_next_session_as_a_replacement_character() -> None:
    """A lone surrogate escaped in a transcript would make the next session's start unsendable: it becomes U+FFFD."""
    rig = Rig()
    start(rig)
    _turn(rig, "\ud83d half", 0.5)  # json.dumps escapes the lone surrogate as the server would
    first = _drop_and_reconnect(rig)
    history = first[0]["session"]["input"]  # type: ignore[index]
    assert history[0]["content"][0]["text"] == "\ufffd half"
    json.dumps(first[0], ensure_ascii=False).encode("utf-8")  # sendable: no lone surrogate left
    assert lv.parse_live_server(frame(type="session.output_transcript.delta", event_id="e", delta="\ud83d\ude00 ok",
                                      start_ms=0, end_ms=10)).delta == "\U0001f600 ok"  # a whole pair stays


def test_each_new_sessions_first_words_are_a_turn_of_their_own() -> None:
    """A new session's timeline starts again at zero: its first words begin a new stretch of speech,
    under an id of their own, and the history keeps them as a message of their own."""
    rig = Rig()
    start(rig)
    asked = ["What time is it", "And the weather", "Hello?"]
    started = []
    for n, words in enumerate(asked):
        if n:
            _drop_and_reconnect(rig)
        events = rig.feed(frame(type="session.input_transcript.delta", event_id=f"u{n}", delta=words, start_ms=1000,
                                end_ms=1600), rig.t)
        started += [e.item_id for e in events if isinstance(e, SpeechStarted)]
    assert len(started) == 3 and len(set(started)) == 3
    assert [m["content"][0]["text"] for m in rig.machine.history.messages()] == asked


def test_a_fork_is_told_of_a_cut_once_and_not_after_a_later_reply_was_heard_whole() -> None:
    rig = Rig(live_store=True)
    start(rig)
    track(rig, [(0.2, 1.0), (3.2, 1.0)], 5.0)
    rig.play(0.6)
    assert rig.machine.interrupt(rig.t).barge_in is not None
    rig.play(5.0)  # the next reply is heard to its end

    def fork() -> list[str]:
        rig.machine.connection_lost(rig.t, 1006, "dropped")
        assert rig.machine.fork_from is not None
        protocol = LiveProtocol()
        rig.machine.configure(protocol)
        rig.machine.attach(protocol)
        rig.protocol = protocol
        rig.machine.restore(rig.t)
        types = [str(e["type"]) for e in sent(protocol)]
        rig.feed(frame(type="session.started", event_id="s", session={
            "id": "sess_f", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), rig.t)
        return types + [str(e["type"]) for e in sent(protocol)]  # commands wait for session.started

    assert fork() == ["session.start"]  # no note on a cut the listener has heard past
    begin = rig.t
    fork_track = Rig()
    track(fork_track, [(0.2, 1.0)], 2.0)  # the fork's track, on its own timeline from zero
    rig.due = [(at + begin, text) for at, text in fork_track.due]
    rig.play(begin + 0.6)
    assert rig.machine.interrupt(rig.t).barge_in is not None
    rig.play(begin + 2.0)
    assert fork() == ["session.start", "session.instructions.append"]  # the cut last: told once
    assert fork() == ["session.start"]


def test_a_fork_is_not_told_an_old_cut_when_the_reply_heard_whole_since_was_still_open_at_the_drop() -> None:
    """The later reply was heard to its end, but no silence long enough to end it had come when the connection
    dropped: it was reported at the drop, yet the fork was still told the older cut."""
    rig = Rig(live_store=True)
    start(rig)
    track(rig, [(0.2, 1.0), (3.2, 1.0)], 4.4)  # the second reply: 200 ms of silence after it, less than a gap
    rig.play(0.6)
    assert rig.machine.interrupt(rig.t).barge_in is not None
    rig.play(4.5)
    rig.machine.connection_lost(rig.t, 1006, "dropped")
    protocol = LiveProtocol()
    rig.machine.configure(protocol)
    rig.machine.attach(protocol)
    rig.protocol = protocol
    types = [e["type"] for e in sent(protocol)]
    rig.feed(frame(type="session.started", event_id="s", session={
        "id": "sess_f", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), rig.t)
    assert types + [e["type"] for e in sent(protocol)] == ["session.start"]  # commands wait for session.started


def test_hours_of_replies_keep_every_table_bounded() -> None:
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(4800) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1
    silence = np.zeros(14_400, np.int16)
    for k in range(300):  # 300 short replies, none followed by a user transcript
        ms = k * 800
        rig.feed(frame(type="session.output_audio.delta",
                       delta=base64.b64encode(tone.tobytes()).decode()), rig.t)
        rig.feed(frame(type="session.output_transcript.delta", event_id=f"o{k}", delta="Sure.", start_ms=ms,
                       end_ms=ms + 200), rig.t)
        rig.feed(frame(type="session.output_audio.delta",
                       delta=base64.b64encode(silence.tobytes()).decode()), rig.t)
        rig.play(rig.t + 0.8)
    sizes = rig.machine.sizes()
    assert sizes["live_utterances"] <= KEEP_UTTERANCES + 1 and sizes["live_texts"] <= KEEP_UTTERANCES + 1
    assert sizes["live_finished"] <= KEEP_UTTERANCES + 1 and sizes["live_history"] <= MAX_MESSAGES
    assert all(n <= KEEP_UTTERANCES + 2 for n in rig.playout.sizes().values())
    assert sizes["metrics_utterances"] == 300 <= KEEP  # figures stay, as many as a Realtime session keeps
    report = rig.machine.report(rig.t)
    # each utterance is its tone and the silence that ended it: the ones let go report what the kept ones do
    assert len(report.items) == 300
    assert all(abs(item.heard_ms - 800.0) < 1 and abs(item.received_ms - 800.0) < 1 for item in report.items)
    assert json.dumps(rig.machine.history.messages())  # plain JSON, as session.start takes it


def test_reply_words_placed_far_ahead_or_never_voiced_are_not_kept_for_ever() -> None:
    """Before, every output transcript delta was kept until audio passed it: words placed hours ahead, or a flood
    with no audio at all, piled up (each insert slower than the last) and stayed after the replies that followed."""
    rig = Rig()
    start(rig)
    said = rig.machine.receive  # straight to the machine: the flood is the point, not the wire
    far = [said(lv.LiveOutputTranscriptDelta(type="session.output_transcript.delta", event_id=f"f{k}", delta="far ",
                                             start_ms=3_600_000 + k, end_ms=3_600_001 + k), rig.t)
           for k in range(3)]
    errors = [e for effects in far for e in effects.events if isinstance(e, SessionError)]
    assert len(errors) == 3 and all(e.code == "malformed_event" for e in errors)
    assert "ignored the times of an output transcript delta: 3600000 ms" in errors[0].message
    assert rig.machine.sizes()["live_texts"] == 0
    for k in range(MAX_TEXTS + 500):  # within the slack, never voiced
        said(lv.LiveOutputTranscriptDelta(type="session.output_transcript.delta", event_id=f"n{k}", delta="w ",
                                          start_ms=60_000, end_ms=60_100), rig.t)
    assert rig.machine.sizes()["live_texts"] == MAX_TEXTS


def _delegate(rig: Rig, call_id: str, n: int) -> list[str]:
    """The Responses backend asks for ``weather`` (response ``resp_<n>``): the calls that became runnable."""
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "weather",
            "arguments": '{"city": "Paris"}', "status": "completed"}
    calls = []
    for i, event in enumerate([{"type": "response.created", "response": {"id": f"resp_{n}"}},
                               {"type": "response.output_item.done", "item": item},
                               {"type": "response.completed", "response": {"id": f"resp_{n}"}}]):
        rig.protocol.receive(frame(type="response.event", event_id=f"r{n}{i}", delegation_id=f"del_{n}", event=event))
        for output in rig.protocol.events():
            calls.extend(c.call_id for c in rig.machine.receive(output, rig.t).calls)
    return calls


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return registry


@pytest.mark.parametrize("finished", ["after the drop", "before the new session"])
def test_a_tool_running_at_a_drop_runs_once_and_its_result_is_told_to_the_next_session(finished: str) -> None:
    """The next session never made the call: it gets the result as silent context, not an output it would refuse
    nor the lost response's follow-up; a call of its own is answered as usual."""
    rig = Rig(_registry())
    start(rig)
    assert _delegate(rig, "call_1", 1) == ["call_1"]
    assert rig.machine.calls.begin("call_1")
    if finished == "before the new session":
        rig.machine.connection_lost(rig.t, 1006, "dropped")
        rig.machine.calls.on_result("call_1", "sunny in Paris")
        assert not rig.machine.drain_tools()  # nothing goes while away
        protocol = LiveProtocol()
        rig.machine.configure(protocol)
        rig.machine.attach(protocol)
        rig.protocol = protocol
        sent(protocol)
        rig.feed(frame(type="session.started", event_id="s2", session={
            "id": "sess_2", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}), rig.t)
    else:
        _drop_and_reconnect(rig)
        rig.machine.calls.on_result("call_1", "sunny in Paris")
    assert not rig.machine.calls.begin("call_1")  # it never runs again
    assert rig.machine.drain_tools()
    out = sent(rig.protocol)
    assert [e["type"] for e in out] == ["session.thinking.append"]
    assert "'weather'" in str(out[0]["content"]) and "sunny in Paris" in str(out[0]["content"])
    assert out[0]["delegation_id"] is None
    assert rig.machine.sizes()["live_orphan_calls"] == 0
    # the new session's own call: its output and the one follow-up, as before the drop
    assert _delegate(rig, "call_2", 2) == ["call_2"]
    assert rig.machine.calls.begin("call_2")
    rig.machine.calls.on_result("call_2", "sunny in Paris")
    rig.machine.drain_tools()
    assert [e["type"] for e in sent(rig.protocol)] == ["response.item.create", "response.create"]


def test_a_long_result_told_to_the_next_session_is_cut_short() -> None:
    rig = Rig(_registry())
    start(rig)
    _delegate(rig, "call_1", 1)
    assert rig.machine.calls.begin("call_1")
    _drop_and_reconnect(rig)
    rig.machine.calls.on_result("call_1", "x" * 100_000)
    rig.machine.drain_tools()
    (note,) = sent(rig.protocol)
    assert len(str(note["content"])) < 2_000 and str(note["content"]).endswith("(cut short)")


def test_a_tool_output_too_large_as_sent_goes_as_an_error_output() -> None:
    """Live frames escape non-ASCII characters: 25 000 'é' are 150 kB on the wire. Over a 64 KiB data channel the
    output is an error output the model can read, not an exception that loses it."""
    rig = Rig(_registry())
    start(rig)
    rig.protocol.max_event_bytes = 65_536
    rig.machine.attach(rig.protocol)  # the limit as a WebRTC connection gives it
    _delegate(rig, "call_1", 1)
    assert rig.machine.calls.begin("call_1")
    rig.machine.calls.on_result("call_1", "é" * 25_000)
    assert rig.machine.drain_tools()
    out = sent(rig.protocol)
    assert [e["type"] for e in out] == ["response.item.create", "response.create"]
    assert "too large to send" in str(out[0]["item"]["output"])  # type: ignore[index]


def test_a_result_told_after_a_second_drop_still_names_its_tool() -> None:
    rig = Rig(_registry())
    start(rig)
    _delegate(rig, "call_1", 1)
    assert rig.machine.calls.begin("call_1")
    rig.machine.connection_lost(rig.t, 1006, "dropped")
    rig.machine.calls.on_result("call_1", "sunny in Paris")  # finished while away
    rig.machine.connection_lost(rig.t, 1006, "dropped again")
    _drop_and_reconnect(rig)
    rig.machine.drain_tools()
    (note,) = sent(rig.protocol)
    assert "'weather'" in str(note["content"]) and "sunny in Paris" in str(note["content"])


def test_drops_before_a_delegations_response_ends_keep_the_tool_tables_bounded() -> None:
    rig = Rig(_registry())
    start(rig)
    item = {"type": "function_call", "id": "fc", "call_id": "c", "name": "weather", "arguments": "{}",
            "status": "completed"}
    for n in range(300):
        for i, event in enumerate([{"type": "response.created", "response": {"id": f"resp_{n}"}},
                                   {"type": "response.output_item.done", "item": {**item, "call_id": f"call_{n}"}}]):
            rig.feed(frame(type="response.event", event_id=f"r{n}{i}", delegation_id=f"d{n}", event=event), rig.t)
        assert rig.machine.calls.begin(f"call_{n}")
        rig.machine.calls.on_result(f"call_{n}", "ok")
        _drop_and_reconnect(rig)  # the response never ends now
        rig.machine.drain_tools()
        sent(rig.protocol)
    sizes = rig.machine.sizes()
    assert sizes["calls_calls"] == 0 and sizes["calls_responses"] == 0 and sizes["live_orphan_calls"] == 0
    assert sizes["live_call_names"] == 0


def test_delegations_on_one_connection_keep_their_table_bounded() -> None:
    """Each delegation's latest response id was kept until the connection dropped: a Live session of days on one
    connection kept one per delegation for ever (20,000 delegations, 3.3 MB)."""
    from voxline.session.live.delegated import DELEGATIONS

    rig = Rig(_registry())
    start(rig)
    for n in range(DELEGATIONS + 200):
        for i, kind in enumerate(["response.created", "response.completed"]):
            event = {"type": kind, "response": {"id": f"resp_{n}", "status": "completed"}}
            rig.feed(frame(type="response.event", event_id=f"r{n}{i}", delegation_id=f"d{n}", event=event), rig.t)
    assert rig.machine.sizes()["live_delegations"] == DELEGATIONS


def test_a_reply_still_playing_when_the_session_is_closed_for_content_can_be_interrupted() -> None:
    """The rest of the reply plays on after the close; the app may still silence it (a local cut, nothing sent)."""
    rig = Rig()
    start(rig)
    track(rig, [(0.2, 2.0)], 2.5)
    rig.play(0.6)
    events = rig.feed(frame(type="session.closed", event_id="c", reason="content", session=SESSION,
                            usage={"seconds": 0.6}), rig.t)
    assert [type(e).__name__ for e in events] == ["LiveSessionEnded"]
    sent(rig.protocol)
    with pytest.raises(ConfigurationError, match="is over"):
        rig.machine.append("more")
    effects = rig.machine.interrupt(rig.t)  # before: refused as a command to a session that is over
    assert effects.barge_in is not None and effects.barge_in.heard_ms > 0
    assert sent(rig.protocol) == []  # no note for a session that is over


def test_a_result_note_stays_small_whatever_the_server_named_the_tool() -> None:
    from voxline.session.live.delegated import result_note

    note = result_note("n" * 70_000, "r" * 70_000)  # a hostile name: before, the note outgrew a data channel
    assert len(note) < 2_000 and "n" * 64 + "…" in note


@pytest.mark.parametrize(("envelopes", "told"), [(2, True), (3, True), (5, False)])
def test_an_output_the_lost_session_may_not_have_used_is_told_to_the_next(envelopes: int, told: bool) -> None:
    """The output went before the drop while its call's response was still going: that response never reads it,
    the follow-up's does. Until that one ends (envelopes 2: its own still going; 3: its own ended, the follow-up
    asked for; 5: the follow-up created and ended) the lost session may never have used it, and a new session has
    nothing of it. Before, the end of its own response was taken for the session going on from it."""
    rig = Rig(_registry())
    start(rig)
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
            "arguments": '{"city": "Paris"}', "status": "completed"}
    events = [{"type": "response.created", "response": {"id": "resp_1"}},
              {"type": "response.output_item.done", "item": item}]
    for i, event in enumerate(events):
        rig.feed(frame(type="response.event", event_id=f"r{i}", delegation_id="del_1", event=event), rig.t)
    assert rig.machine.calls.begin("call_1")
    rig.machine.calls.on_result("call_1", "sunny in Paris")
    rig.machine.drain_tools()
    assert [e["type"] for e in sent(rig.protocol)] == ["response.item.create"]
    later = [{"type": "response.completed", "response": {"id": "resp_1"}},
             {"type": "response.created", "response": {"id": "resp_2"}},
             {"type": "response.completed", "response": {"id": "resp_2"}}]
    for i, event in enumerate(later[:envelopes - 2]):
        rig.feed(frame(type="response.event", event_id=f"l{i}", delegation_id="del_1", event=event), rig.t)
        if i == 0:
            rig.machine.drain_tools()
            assert [e["type"] for e in sent(rig.protocol)] == ["response.create"]  # the follow-up, which reads it
    _drop_and_reconnect(rig)
    rig.machine.drain_tools()
    notes = [e for e in sent(rig.protocol) if e["type"] == "session.thinking.append"]
    assert [("sunny in Paris" in str(n["content"])) for n in notes] == ([True] if told else [])
    assert rig.machine.sizes()["live_call_names"] == 0


@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize(("follow_up_ended", "told"), [(True, False), (False, True)])
def test_an_output_sent_after_its_response_ended_is_told_again_only_if_its_follow_up_had_not(
        calls: int, follow_up_ended: bool, told: bool) -> None:
    """The usual order: the delegation's response ends with its calls, then the outputs go with a follow-up. Once
    the follow-up ended, the session went on from them: before, of two calls the first stayed marked as not used,
    and the next drop told the new session it had "finished after the connection was lost"; and an output whose
    follow-up had not ended was not told at all."""
    rig = Rig(_registry())
    start(rig)
    items = [{"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}", "name": "weather",
              "arguments": '{"city": "Paris"}', "status": "completed"} for k in range(calls)]
    events = [{"type": "response.created", "response": {"id": "resp_1"}},
              *({"type": "response.output_item.done", "item": item} for item in items),
              {"type": "response.completed", "response": {"id": "resp_1"}}]
    for i, event in enumerate(events):
        rig.feed(frame(type="response.event", event_id=f"r{i}", delegation_id="del_1", event=event), rig.t)
    for k in range(calls):
        assert rig.machine.calls.begin(f"call_{k}")
    kinds = []
    for k in range(calls):  # each output goes as its tool answers, the follow-up after the last
        rig.machine.calls.on_result(f"call_{k}", f"sunny in Paris ({k})")
        rig.machine.drain_tools()
        kinds += [e["type"] for e in sent(rig.protocol)]
    assert kinds == ["response.item.create"] * calls + ["response.create"]
    follow_up = [{"type": "response.created", "response": {"id": "resp_2"}}]
    if follow_up_ended:
        follow_up.append({"type": "response.completed", "response": {"id": "resp_2"}})
    for i, event in enumerate(follow_up):
        rig.feed(frame(type="response.event", event_id=f"f{i}", delegation_id="del_1", event=event), rig.t)
    assert rig.machine.sizes()["live_call_names"] == (0 if follow_up_ended else calls)
    _drop_and_reconnect(rig)
    rig.machine.drain_tools()
    notes = [str(e["content"]) for e in sent(rig.protocol) if e["type"] == "session.thinking.append"]
    assert [k for k in range(calls) if any(f"sunny in Paris ({k})" in n for n in notes)] == (
        list(range(calls)) if told else [])


@pytest.mark.parametrize("end", ["session closed", "connection lost"])
def test_the_last_reply_heard_is_reported_when_the_session_ends_or_drops_with_no_gap_after_it(end: str) -> None:
    """A reply is reported once a silence after it closes it. The last one of a session that closes, or of a
    connection that drops, has none after it: before, it was never reported, though all of it was heard."""
    rig = Rig()
    start(rig)
    track(rig, [(0.2, 0.8)], 1.0, lead=0.0)
    played = rig.play(1.2)
    assert not [e for e in played if isinstance(e, HeardTranscript)]  # no gap yet: it may go on
    if end == "session closed":
        told = rig.feed(frame(type="session.closed", event_id="c", reason="close_requested", session=SESSION,
                              usage={"seconds": 1.2}), rig.t)
        told += rig.play(1.3)
    else:
        told = list(rig.machine.connection_lost(rig.t, 1006, "gone").events)
        told += rig.play(1.3)
    (heard,) = [e for e in told if isinstance(e, HeardTranscript)]
    assert heard.text == heard.full_text == "Paris is sunny today"
    if end == "connection lost":  # it ran dry mid-sound, more to come: the drop cut it, at all that was heard
        assert [e.trigger for e in told if isinstance(e, BargeIn)] == ["connection_lost"]
    else:
        assert heard.estimate is False
    assert [m["content"][0]["text"] for m in rig.machine.history.messages()] == ["Paris is sunny today"]


def test_a_long_stretch_of_user_words_costs_each_word_alike_and_stays_one_bounded_message() -> None:
    """Every word was added to the whole message so far (a copy each time): 20 MB in one message, and each event
    costing more than the last. What is held (and so copied) stays within twice the bound."""
    from voxline.session.live.history import MAX_MESSAGE_CHARS, HeardHistory

    history = HeardHistory()
    word = "word " * 200  # 1 000 characters an event
    for _ in range(20_000):
        history.user("live_user1", word)
    [message] = history.messages()
    text = message["content"][0]["text"]
    assert len(text) <= MAX_MESSAGE_CHARS + 1 and text.startswith("…word") and text.endswith("word")
    [kept] = history._messages
    assert kept.size <= 2 * MAX_MESSAGE_CHARS + len(word)  # what is held stays within the bound


def test_a_reply_whose_track_stops_mid_sound_ends_after_the_silence_that_would_have_ended_it() -> None:
    """The track stalls or stops mid-sentence: the assistant is speaking while more may come, but not for ever (a
    session would never be idle): after as long as the silence that ends an utterance, the reply is over and
    reported, and the playout's silence from then on is no underrun."""
    rig = Rig()
    start(rig)
    tone = (3000 * np.sin(np.arange(RATE) * 2 * np.pi * 220 / RATE)).astype(np.int16)
    tone[tone == 0] = 1
    rig.feed(audio_delta(tone[:7200]), rig.t)
    events = rig.play(3.0)
    gap_s = rig.machine.timeline.gap / RATE
    changes = [(e.state, e.at) for e in events if isinstance(e, StateChanged)]
    assert [state for state, _at in changes] == ["speaking", "listening"]
    assert changes[1][1] == pytest.approx(0.3 + gap_s, abs=0.041)
    assert [e.text for e in events if isinstance(e, HeardTranscript)] == [""]
    assert rig.playout.underrun_samples <= (gap_s + 0.04) * RATE
    assert rig.machine.idle(rig.t, tools_busy=False)


def test_delegated_tool_rounds_without_the_user_stop_at_max_tool_rounds_until_the_user_speaks() -> None:
    """A Responses model that keeps calling tools kept a Live session's delegation busy for good: every output went
    with a follow-up. Past max_tool_rounds in a row the outputs go alone, and the app is told; words of the user's
    start the count again."""
    rig = Rig(_registry(), max_tool_rounds=2)
    start(rig)

    def round_of(n: int) -> tuple[list[str], list[object]]:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "weather",
                "arguments": '{"city": "Paris"}', "status": "completed"}
        events: list[object] = []
        for i, event in enumerate([{"type": "response.created", "response": {"id": f"resp_{n}"}},
                                   {"type": "response.output_item.done", "item": item},
                                   {"type": "response.completed", "response": {"id": f"resp_{n}"}}]):
            events += rig.feed(frame(type="response.event", event_id=f"r{n}{i}", delegation_id="del_1", event=event),
                               rig.t)
        assert rig.machine.calls.begin(f"call_{n}")
        rig.machine.calls.on_result(f"call_{n}", "sunny")
        rig.machine.drain_tools()
        return [e["type"] for e in sent(rig.protocol)], events

    for n in (1, 2):
        assert round_of(n)[0] == ["response.item.create", "response.create"]
    kinds, events = round_of(3)
    assert kinds == ["response.item.create"]  # the output, and nothing asked
    assert [(e.code, e.message) for e in events if isinstance(e, SessionError)] == [
        ("tool_rounds_exceeded", "3 tool rounds in a row without a user turn (max_tool_rounds 2): the outputs of "
                                 "resp_3 are sent, and no response is asked for them")]
    rig.feed(frame(type="session.input_transcript.delta", event_id="u", delta="and tomorrow?", start_ms=0,
                   end_ms=400), rig.t)
    assert round_of(4)[0] == ["response.item.create", "response.create"]


def test_a_session_updated_in_place_of_session_started_does_not_open_the_session() -> None:
    """Before, the watchdog asked whether a session had come at all, and a session.updated set it: a server that
    never started the session was never given up on, and every command stayed held."""
    protocol = LiveProtocol()
    protocol.send({"type": "session.instructions.append", "text": "held"})
    protocol.receive(frame(type="session.updated", event_id="u", session=SESSION))
    assert protocol.session is not None and not protocol.opened and protocol.holding == 1
    assert LiveProtocol.OPENING_EVENT == "session.started"
    protocol.receive(frame(type="session.started", event_id="s", session=SESSION))
    assert protocol.opened and protocol.holding == 0
