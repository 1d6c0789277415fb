"""The Live engine with plain lists: start, the timeline, turns, the model-owned barge-in, close.

Every event is validated against ``openai.types.live`` for the audience that receives it
(``tests/support/live_harness.py``).
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from tests.support.engine_harness import CHAR_MS, fake_voice
from tests.support.live_harness import RATE, LiveHarness, audio_of, script, silence, speech


def test_start_answers_with_the_resolved_session() -> None:
    h = LiveHarness()
    [started] = h.start(audio={"output": {"voice": "cedar"}}, instructions="Be brief.")
    assert started["type"] == "session.started" and started["client_event_id"] == "evt_start"
    session = started["session"]
    assert session["id"].startswith("sess_") and session["model"] == "gpt-live-1" and session["status"] == "active"
    assert session["audio"] == {"output": {"voice": "cedar"}, "format": {"type": "audio/pcm", "rate": 24000}}
    assert session["instructions"] == "Be brief." and session["store"] is False
    assert session["delegation"] == {"type": "client", "acknowledgement_delay_ms": 0}
    assert session["expires_at"] == 1_000 + 7200


def test_commands_before_start_and_a_second_start_are_refused() -> None:
    h = LiveHarness()
    [error] = h.send({"type": "session.input_audio.mute", "event_id": "m1"})
    assert error["error"]["code"] == "session_not_started" and error["client_event_id"] == "m1"
    assert error["error"]["client_event_id"] == "m1"
    h.start()
    [again] = h.start()
    assert again["error"]["code"] == "session_already_started"


@pytest.mark.parametrize(
    ("session", "code", "param"),
    [
        ({"model": "gpt-realtime"}, "unsupported_model", "session.model"),
        ({"model": "gpt-live-1", "audio": {"format": {"type": "audio/pcm", "rate": 8000}}}, "invalid_value",
         "session.audio.format.rate"),
        ({"model": "gpt-live-1", "audio": {"format": {"type": "audio/opus", "rate": 48000}}}, "invalid_value",
         "session.audio.format.type"),
        ({"model": "gpt-live-1", "turn_detection": None, "vad": 1}, "unknown_parameter", "session.vad"),
        ({"instructions": "no model"}, "missing_required_parameter", "session.model"),
        ({"model": "gpt-live-1", "input": [{"role": "user", "content": []}]}, "invalid_value",
         "session.input[0].content"),
    ],
)
def test_a_bad_start_is_an_error_in_the_services_shape_and_the_session_waits(session, code, param) -> None:
    h = LiveHarness()
    [error] = h.send({"type": "session.start", "event_id": "s1", "session": session})
    assert error["type"] == "error" and error["error"]["code"] == code and error["error"]["param"] == param
    assert error["error"]["type"] == "invalid_request_error"
    assert not h.engine.started
    assert h.start()[0]["type"] == "session.started"


def test_bad_frames_get_errors_and_leave_the_session_usable() -> None:
    h = LiveHarness()
    h.start()
    assert h.send("not json")[0]["error"]["code"] == "invalid_json"
    assert h.send({"type": "session.truncate"})[0]["error"]["param"] == "type"
    assert h.send({"type": "session.input_audio.append", "audio": "***"})[0]["error"]["param"] == "audio"
    assert h.send({"type": "session.thinking.append", "content": "x"})[0]["error"]["code"] == "missing_required_parameter"
    assert h.send({"type": "response.create", "event_id": "r"})[0]["error"]["code"] == "delegation_type_mismatch"
    assert h.send({"type": "decision.create", "event_id": "d"})[0]["error"]["code"] == "not_supported_locally"
    assert h.feed(silence(0.2))  # still streaming


def test_a_frame_larger_than_a_realtime_event_is_refused_unread_before_and_after_the_start() -> None:
    """A 60 MB session.start was taken, and its 60 MB echoed in session.started (and in every sideband
    snapshot): the Live socket had no event limit but websockets' frame size."""
    h = LiveHarness()
    h.engine.max_event_bytes = 1000
    big = {"type": "session.start", "event_id": "big", "session": {"model": "gpt-live-1", "instructions": "x" * 1000}}
    [error] = h.send(big)
    assert error["type"] == "error" and error["error"]["code"] == "event_too_large"
    assert "more than the maximum of 1000 bytes" in error["error"]["message"]
    assert h.start()[0]["type"] == "session.started"
    [error] = h.send({"type": "session.instructions.append", "content": "y" * 1000})
    assert error["error"]["code"] == "event_too_large"
    assert h.feed(silence(0.2))  # still streaming


def test_the_largest_append_the_service_takes_is_taken_on_a_live_socket() -> None:
    h = LiveHarness()
    h.start()
    largest = b"\x00" * (15 * 1024 * 1024)
    taken = h.send({"type": "session.input_audio.append", "audio": base64.b64encode(largest).decode()})
    assert not [e for e in taken if e["type"] == "error"], taken[:1]
    [error] = [e for e in h.send({"type": "session.input_audio.append",
                                  "audio": base64.b64encode(largest + b"\0\0").decode()}) if e["type"] == "error"]
    assert error["error"]["message"].startswith("Invalid 'audio': 15728642 bytes is more than the maximum")


def test_the_output_track_runs_with_the_callers_audio_and_never_stops() -> None:
    h = LiveHarness()
    h.start()
    h.feed(silence(1.05))
    frames = h.of("session.output_audio.delta")
    assert len(frames) == 10  # one 100 ms frame per 100 ms of caller audio, whole frames only
    assert all("start_ms" not in f for f in frames)  # the primary connection gets no timestamps
    assert audio_of(h.primary).size == RATE and not audio_of(h.primary).any()
    h.feed(silence(0.05))
    assert len(h.of("session.output_audio.delta")) == 11


def test_a_turn_is_transcribed_on_the_timeline_and_answered_after_the_latency() -> None:
    h = LiveHarness(reply_latency_ms=300, vad_silence_ms=500)
    h.start()
    h.feed(np.concatenate([silence(0.5), speech(1.0), silence(4.0)]))
    heard = h.of("session.input_transcript.delta")
    assert "".join(e["delta"] for e in heard) == "Hi."
    assert heard[0]["start_ms"] == 500 and abs(heard[-1]["end_ms"] - 1500) <= 10
    spoken = h.of("session.output_transcript.delta")
    assert h.said() == "Hello there, caller."
    reply_start = spoken[0]["start_ms"]
    assert 2300 <= reply_start <= 2320  # speech stop detected at 2000 ms, +300 ms
    assert spoken[-1]["end_ms"] == reply_start + len("Hello there, caller.") * CHAR_MS
    audio = audio_of(h.primary)
    first = int(np.flatnonzero(audio)[0])
    assert abs(first * 1000 // RATE - reply_start) <= 1
    expected = fake_voice("Hello there, caller.")
    assert np.array_equal(audio[first : first + expected.size], expected)
    assert list(h.engine.history) == [("user", "Hi."), ("assistant", "Hello there, caller.")]


def test_the_stand_in_stops_speaking_when_it_hears_the_caller() -> None:
    full = "A rather long reply that the caller will interrupt halfway."
    h = LiveHarness(scenario=script({"say": full}, {"say": "Next."}))
    h.start()
    h.feed(np.concatenate([speech(0.5), silence(1.3)]))  # the reply starts at 1.3 s
    assert np.flatnonzero(audio_of(h.primary))[0] == int(1.3 * RATE)
    h.feed(np.concatenate([speech(0.6), silence(2.0)]))  # the caller speaks again at 1.8 s
    audio = audio_of(h.primary)
    onset = int(1.8 * RATE)
    assert audio[onset - RATE // 100 : onset].any()  # it was speaking up to the caller's onset
    next_reply = int((2.4 + 0.5 + 0.3) * RATE)  # the caller's second turn ends, then the next reply
    assert not audio[onset + RATE * 36 // 1000 : next_reply].any()  # detected after 30 ms, 5 ms fade
    assert audio[next_reply : next_reply + 100].any()
    cut = [e for e in h.of("session.output_transcript.delta") if e["start_ms"] < 2000]
    said = "".join(e["delta"] for e in cut)
    assert said and full.startswith(said) and said != full
    assert cut[-1]["end_ms"] <= 1830
    assert h.engine.history[0] == ("assistant", said.strip())
    assert h.said().endswith("Next.")


def test_speech_before_a_reply_starts_cancels_it() -> None:
    h = LiveHarness(reply_latency_ms=400, vad_silence_ms=300)
    h.start()
    h.feed(np.concatenate([speech(0.4), silence(0.35), speech(0.4), silence(0.1)]))
    assert not audio_of(h.primary).any()


def test_close_reports_the_reason_and_usage_and_ends_everything() -> None:
    h = LiveHarness()
    h.start()
    h.feed(silence(2.5))
    [closed] = h.send({"type": "session.close", "event_id": "bye"})
    assert closed["type"] == "session.closed" and closed["reason"] == "close_requested"
    assert closed["client_event_id"] == "bye" and closed["usage"] == {"seconds": 2.0}
    assert h.feed(silence(0.5)) == [] and h.engine.close("expired") == []


@pytest.mark.parametrize("reason", ["expired", "remote_hangup", "connection_lost"])
def test_the_glue_closes_with_its_reason(reason) -> None:
    h = LiveHarness(observers=1)
    h.start()
    h.take(h.engine.close(reason))
    assert h.observed[-1]["type"] == "session.closed" and h.observed[-1]["reason"] == reason


def test_a_sideband_gets_the_callers_audio_reflected_and_timestamped_output() -> None:
    h = LiveHarness(observers=1)
    h.start(audio={"format": {"type": "audio/pcmu", "rate": 8000}})
    chunk = bytes([0xFF]) * 160  # 20 ms of μ-law silence
    for _ in range(10):
        h.send({"type": "session.input_audio.append", "audio": base64.b64encode(chunk).decode()})
    reflected = [e for e in h.observed if e["type"] == "session.input_audio.append"]
    assert [len(base64.b64decode(e["audio"])) for e in reflected] == [960] * 10  # 20 ms at 24 kHz each
    outs = [e for e in h.observed if e["type"] == "session.output_audio.delta"]
    assert [(o["start_ms"], o["end_ms"]) for o in outs] == [(0, 100), (100, 200)]
    assert all(len(base64.b64decode(o["delta"])) == 4800 for o in outs)
    primary = h.of("session.output_audio.delta")
    assert [len(base64.b64decode(p["delta"])) for p in primary] == [800, 800]  # 100 ms of 8 kHz μ-law


def test_sideband_commands_answer_the_sideband_and_it_cannot_send_audio() -> None:
    h = LiveHarness(observers=1)
    h.start()
    [error] = h.send({"type": "session.input_audio.append", "audio": ""}, "sideband")
    assert error["error"]["param"] == "type" and h.origin == [error]
    assert h.send({"type": "session.input_audio.mute", "event_id": "m"}, "sideband")[0]["type"] == "session.input_audio.muted"


def test_a_muted_caller_moves_the_timeline_but_is_not_heard() -> None:
    h = LiveHarness()
    h.start()
    assert h.send({"type": "session.input_audio.mute", "event_id": "m"})[0]["client_event_id"] == "m"
    h.feed(np.concatenate([speech(0.6), silence(1.5)]))
    assert h.of("session.input_transcript.delta") == [] and not audio_of(h.primary).any()
    assert len(h.of("session.output_audio.delta")) == 21
    h.send({"type": "session.input_audio.unmute"})
    h.feed(np.concatenate([speech(0.6), silence(3.0)]))
    assert h.said() == "Hello there, caller."


def test_commentary_asks_for_a_reply_and_appends_are_placed_on_the_timeline() -> None:
    h = LiveHarness()
    h.start()
    h.feed(silence(0.4))
    [ack] = h.send({"type": "session.commentary.append", "delegation_id": None, "content": "Greet the caller."})
    assert ack["type"] == "session.commentary.appended" and ack["start_ms"] == ack["end_ms"] == 400
    [thought] = h.send({"type": "session.thinking.append", "delegation_id": None, "content": "quiet"})
    assert thought["type"] == "session.thinking.appended"
    h.feed(silence(1.0))
    assert h.said() == "Hello there, caller."


def test_a_content_filter_phrase_closes_the_session_with_content() -> None:
    h = LiveHarness(close_on_text="forbidden")
    h.start()
    events = h.send({"type": "session.instructions.append", "delegation_id": None, "content": "say FORBIDDEN things"})
    assert [e["type"] for e in events] == ["session.instructions.appended", "session.closed"]
    assert events[-1]["reason"] == "content"


def test_a_fixture_plays_over_the_model_and_mutes_the_caller() -> None:
    h = LiveHarness()
    h.start()
    fixture = fake_voice("fixture!")  # 160 ms
    [playing] = h.send({"type": "session.output_audio.fixture.play", "event_id": "fx",
                        "audio": base64.b64encode(fixture.astype("<i2").tobytes()).decode()})
    assert playing["type"] == "session.output_audio.fixture.playing" and playing["client_event_id"] == "fx"
    assert h.send({"type": "session.output_audio.fixture.play", "audio": ""})[0]["error"]["code"] == "fixture_active"
    h.feed(speech(0.3))  # dropped while the fixture plays
    [played] = h.of("session.output_audio.fixture.played")
    assert played["client_event_id"] == "fx"
    assert np.array_equal(audio_of(h.primary)[: fixture.size], fixture)
    assert h.of("session.input_transcript.delta") == []


def test_a_scripted_call_is_delegated_to_the_client_and_its_answer_is_spoken() -> None:
    scenario = script({"output": [{"say": "Let me check."}, {"call": "lookup", "arguments": {"q": 1}}],
                       "after": {"say": "Found it."}})
    h = LiveHarness(scenario=scenario)
    h.start()
    h.feed(np.concatenate([speech(0.5), silence(3.0)]))
    [created] = h.of("session.delegation.created")
    delegation = created["delegation"]
    assert delegation["target"] == "client" and created["offset_ms"] >= h.of("session.output_transcript.delta")[-1]["end_ms"]
    assert h.said() == "Let me check."
    [ack] = h.send({"type": "session.commentary.append", "delegation_id": delegation["id"], "content": "42"})
    assert ack["type"] == "session.commentary.appended"
    h.feed(silence(1.0))
    assert h.said() == "Let me check.Found it."  # as the service, no space between one utterance and the next
    bad = h.send({"type": "session.commentary.append", "delegation_id": delegation["id"], "content": "again"})
    assert bad[0]["error"]["param"] == "delegation_id"


@pytest.mark.parametrize(("fmt", "frame_bytes"), [({"type": "audio/pcm", "rate": 16000}, 3200),
                                                  ({"type": "audio/pcma", "rate": 8000}, 800)])
def test_the_output_track_is_in_the_sessions_format(fmt, frame_bytes) -> None:
    h = LiveHarness()
    [started] = h.start(audio={"format": fmt})
    assert started["session"]["audio"]["format"] == fmt
    width = 2 if fmt["type"] == "audio/pcm" else 1
    chunk = bytes(fmt["rate"] * width // 50)  # 20 ms
    for _ in range(30):
        h.send({"type": "session.input_audio.append", "audio": base64.b64encode(chunk).decode()})
    sizes = [len(base64.b64decode(e["delta"])) for e in h.of("session.output_audio.delta")]
    assert sizes == [frame_bytes] * 6


def test_update_changes_delegation_settings_only_within_its_type() -> None:
    h = LiveHarness()
    h.start()
    [updated] = h.send({"type": "session.update", "session": {"delegation": {"type": "client", "acknowledgement_delay_ms": 250}}})
    assert updated["session"]["delegation"] == {"type": "client", "acknowledgement_delay_ms": 250}
    [error] = h.send({"type": "session.update", "session": {"delegation": {"type": "responses"}}})
    assert error["error"]["code"] == "delegation_type_mismatch"
    assert h.send({"type": "session.update", "session": {"instructions": "x"}})[0]["error"]["code"] == "unknown_parameter"


def test_usage_is_reported_as_the_timeline_runs() -> None:
    h = LiveHarness(usage_every_s=1.0)
    h.start()
    h.feed(silence(2.0), chunk_ms=100)
    assert [e["usage"]["seconds"] for e in h.of("session.usage.updated")] == [1.0, 2.0]


def test_with_responses_delegation_scripted_calls_come_from_the_backend_and_its_answer_is_spoken() -> None:
    scenario = script({"output": [{"say": "One moment."}, {"call": "get_weather", "arguments": {"city": "Paris"}},
                                  {"call": "get_time", "arguments": {}}],
                       "after": {"say": "Sunny, and noon."}})
    h = LiveHarness(scenario=scenario)
    h.start(delegation={"type": "responses", "responses": {"model": "gpt-5.4-mini", "tools": []}})
    h.feed(np.concatenate([speech(0.5), silence(2.5)]))
    [created] = h.of("session.delegation.created")
    assert created["delegation"]["target"] == "responses" and created["delegation"]["response_id"].startswith("resp_")
    nested = [e["event"] for e in h.of("response.event")]
    assert [n["type"] for n in nested] == ["response.created", "response.output_item.added", "response.output_item.done",
                                           "response.output_item.added", "response.output_item.done", "response.completed"]
    calls = [n["item"] for n in nested if n["type"] == "response.output_item.done"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_weather", '{"city":"Paris"}'), ("get_time", "{}")]
    assert h.said() == "One moment."
    unknown = {"type": "function_call_output", "call_id": "call_nope", "output": "x"}
    assert h.send({"type": "response.item.create", "item": unknown})[0]["error"]["param"] == "item.call_id"
    h.send({"type": "response.item.create", "item": {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "sunny"}})
    [early] = h.send({"type": "response.create", "event_id": "go"})
    assert early["error"]["code"] == "function_call_outputs_required" and early["client_event_id"] == "go"
    h.send({"type": "response.item.create", "item": {"type": "function_call_output", "call_id": calls[1]["call_id"], "output": "noon"}})
    continued = h.send({"type": "response.create", "event_id": "go"})
    answer = [e["event"]["item"] for e in continued if e["event"]["type"] == "response.output_item.done"]
    assert answer[0]["content"][0]["text"] == "Sunny, and noon."
    h.feed(silence(1.5))
    assert h.said() == "One moment.Sunny, and noon."


@pytest.mark.parametrize(("delegation", "param"), [
    ({"type": "responses", "responses": {"tools": []}}, "session.delegation.responses.model"),
    ({"type": "responses", "responses": {"model": "m", "tools": [{"type": "web_search"}]}},
     "session.delegation.responses.tools[0].type"),
    ({"type": "responses", "responses": {"model": "m", "tools": [{"type": "function"}]}},
     "session.delegation.responses.tools[0].name"),
    ({"type": "decisions", "decisions": {}}, "session.delegation.type"),
])
def test_a_delegation_the_stand_in_cannot_honour_is_refused_at_start(delegation, param) -> None:
    h = LiveHarness()
    [error] = h.start(delegation=delegation)
    assert error["type"] == "error" and error["error"]["param"] == param


def test_a_chain_of_forks_starts_from_the_newest_messages_only() -> None:
    """Each fork's input was every earlier session's words (8,640 messages after a day of two-hour sessions, echoed
    whole in every session.started): it is the newest MAX_INPUT_ITEMS, the bound a client's own input has."""
    from voxline.realtime.server.live.hub import StoredSession
    from voxline.realtime.server.live.settings import MAX_INPUT_ITEMS, LiveSettings

    settings = LiveSettings(model="gpt-live")
    for n in range(6):
        said = tuple(("user" if k % 2 else "assistant", f"session {n}, line {k}") for k in range(200))
        settings = StoredSession(f"sess_{n}", settings, said, turn_index=100, user_turns=100).fork_base()
        assert len(settings.input) <= MAX_INPUT_ITEMS
    assert settings.input[-1]["content"][0]["text"] == "session 5, line 199"
