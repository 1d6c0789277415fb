"""An embedding application's mistakes: each is one clear error, raised early or reported as a
typed event, and none cancels the application's own task or leaks a connection."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.playout import PlayoutBuffer
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed
from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.lockstep import run_lockstep
from voxline.session.replay import engine_connector
from voxline.session.settings import SessionSettings, SettingsError, UsageError, api_key_from_env, load_settings
from voxline.session.tools import ToolRegistry
from voxline.session.voice import VoiceSession

SETTINGS = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="none")


def _session(clock: VirtualClock, opened: list[RealtimeConnection] | None = None, **options: Any) -> VoiceSession:
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def counted() -> RealtimeConnection:
        conn = await connect()
        if opened is not None:
            opened.append(conn)
        return conn

    return VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=counted, **options)


def _blocks(clock: VirtualClock, good: int, bad: Any) -> AsyncIterator[Any]:
    async def blocks() -> AsyncIterator[Any]:
        for _ in range(good):
            await clock.sleep(0.02)
            yield np.zeros(480, dtype=np.int16)
        if isinstance(bad, BaseException):
            raise bad
        yield bad
    return blocks()


@pytest.mark.parametrize("bad", [RuntimeError("mic unplugged"), SystemExit("the input gave up"),
                                 np.zeros(480, dtype=np.float32), np.zeros((480, 2), dtype=np.int16), None, (0.0,)],
                         ids=["raises", "SystemExit", "float", "2-D", "None", "bad pair"])
def test_a_broken_input_is_one_error_event_and_the_session_goes_on(bad: Any) -> None:
    clock = VirtualClock()

    async def main() -> tuple[list[Any], bool]:
        async with _session(clock, input=_blocks(clock, 3, bad)) as session:
            await clock.sleep(0.5)  # the application's own task is not cancelled by the input's failure
            await session.send_text("still here?")
            await clock.sleep(3.0)
            return session.pending_events(), session.connected

    events, connected = run_lockstep(main(), clock)
    errors = [e for e in events if isinstance(e, SessionError)]
    assert [(e.code, e.fatal) for e in errors] == [("input_failed", False)], errors
    assert errors[0].message.startswith("the input failed: ") and "\n" not in errors[0].message
    assert connected and any(type(e).__name__ == "ResponseFinished" for e in events)


def test_an_input_that_never_waits_lets_the_loop_run_other_work() -> None:
    """Silence made in a loop hands over its blocks without ever waiting: the session takes a few at a time and
    lets the event loop run other tasks (the app's, other sessions') between them, instead of holding it for as
    long as the input lasts."""
    clock = VirtualClock()
    turns: list[int] = []  # another task's turns on the loop so far, as each block is handed over
    other_turns = 0

    async def silence() -> AsyncIterator[Any]:
        block = np.zeros(480, dtype=np.int16)
        for _ in range(3000):  # a minute of audio, handed over at once
            turns.append(other_turns)
            yield block
        await asyncio.Event().wait()

    async def other() -> None:  # until the input is over: a task always ready would stop virtual time
        nonlocal other_turns
        while len(turns) < 3000:
            other_turns += 1
            await asyncio.sleep(0)

    async def main() -> list[Any]:
        async with _session(clock, input=silence()) as session:
            ticker = asyncio.create_task(other())
            await session.send_text("still here?")
            await clock.sleep(3.0)
            await ticker
            return session.pending_events()

    events = run_lockstep(main(), clock)
    longest = max(sum(1 for _ in run) for _turn, run in itertools.groupby(turns))
    assert len(turns) == 3000 and longest <= 16, longest  # before: a run of thousands of blocks at once
    assert any(type(e).__name__ == "ResponseFinished" for e in events)


@pytest.mark.parametrize(("pair", "said"), [
    (("0.0", np.zeros(480, np.int16)), "an input pair's capture time is a finite number of seconds, not str '0.0'"),
    ((float("nan"), np.zeros(480, np.int16)), "an input pair's capture time is a finite number of seconds, not float nan"),
    ((0.0, np.zeros(480, np.int16), 1), "an input pair is (capture time in s, block), not a tuple of 3"),
])
def test_an_input_pair_with_a_bad_time_names_it(pair: Any, said: str) -> None:
    """Before, a text time was "can only concatenate str (not float) to str", and NaN was taken silently."""
    clock = VirtualClock()

    async def main() -> list[Any]:
        async with _session(clock, input=_blocks(clock, 1, pair)) as session:
            await clock.sleep(0.5)
            return session.pending_events()

    errors = [e for e in run_lockstep(main(), clock) if isinstance(e, SessionError)]
    assert [e.message for e in errors] == [f"the input failed: TypeError: {said}"]


def test_a_float_block_names_what_an_input_block_is() -> None:
    clock = VirtualClock()

    async def main() -> list[Any]:
        async with _session(clock, input=_blocks(clock, 1, np.zeros(480, dtype=np.float32))) as session:
            await clock.sleep(0.2)
            return session.pending_events()

    [error] = [e for e in run_lockstep(main(), clock) if isinstance(e, SessionError)]
    assert error.message == ("the input failed: TypeError: an input block is a 1-D int16 array (24 kHz mono), "
                             "not float32 of shape (480,)")


def test_a_session_opens_once_and_never_again_after_closing_and_leaks_nothing() -> None:
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []

    async def main() -> list[str]:
        refused = []
        session = _session(clock, opened)
        async with session:
            with pytest.raises(ConfigurationError) as again:
                await session.__aenter__()
            refused.append(str(again.value))
        with pytest.raises(ConfigurationError) as closed:
            async with session:
                pass
        refused.append(str(closed.value))
        early = _session(clock, opened)
        with pytest.raises(ConfigurationError) as unopened:  # no wait that never ends
            await anext(aiter(early))
        refused.append(str(unopened.value))
        await early.aclose()  # closed before it ever opened
        assert [event async for event in early] == []  # closed: the end, not an error
        with pytest.raises(ConfigurationError):
            async with early:
                pass
        return refused

    refused = run_lockstep(main(), clock)
    assert refused == ["this session is already open",
                       "a closed session cannot be opened again: make a new VoiceSession",
                       "the session is not open yet: use 'async with VoiceSession(...)' first"]
    assert len(opened) == 1 and opened[0].closed  # one connection in all, and it was closed


def test_a_session_refuses_commands_from_another_event_loop() -> None:
    clock = VirtualClock()
    session = _session(clock)
    other_errors: list[str] = []

    async def elsewhere() -> None:
        for command in (session.send_text("hi"), session.interrupt(), session.update(instructions="x")):
            try:
                await command
            except ConfigurationError as exc:
                other_errors.append(str(exc))

    async def main() -> None:
        async with session:
            await asyncio.to_thread(asyncio.run, elsewhere())

    run_lockstep(main(), clock)
    assert other_errors == ["this session belongs to another event loop: use it where it was opened"] * 3


def test_pending_events_from_another_thread_while_the_session_runs_is_refused_and_loses_nothing() -> None:
    """A UI thread draining the session's queue would race the loop that fills and reads it (before, it was let
    do so); on the session's loop, and once the loop has stopped, it takes the events as before."""
    clock = VirtualClock()
    session = _session(clock)
    refused: list[str] = []

    def from_ui_thread() -> None:
        try:
            session.pending_events()
        except ConfigurationError as exc:
            refused.append(str(exc))

    async def main() -> list[Any]:
        async with session:
            await session.send_text("hi")
            await clock.sleep(1.0)
            await asyncio.to_thread(from_ui_thread)
            await clock.sleep(1.0)
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert refused == ["pending_events() runs on the session's event loop, which is running in another thread: call "
                       "it there (loop.call_soon_threadsafe)"]
    assert any(type(e).__name__ == "ResponseStarted" for e in events)  # nothing was taken by the refused call
    session.pending_events()  # the loop has stopped: any thread may take what is left


def test_interrupting_again_after_the_cut_is_nothing_to_cut() -> None:
    clock = VirtualClock()

    async def main() -> tuple[list[Any], list[Any]]:
        async with _session(clock) as session:
            await session.send_text("talk to me")
            while not any(type(e).__name__ == "AssistantAudioStarted" for e in session.pending_events()):
                await clock.sleep(0.05)
            await clock.sleep(0.5)
            results = [await session.interrupt() for _ in range(3)]  # before the server's response.done
            await clock.sleep(1.0)
            return results, [e for e in session.pending_events() if type(e).__name__ == "BargeIn"]

    results, barge_ins = run_lockstep(main(), clock)
    assert results[0] is not None and results[1:] == [None, None]
    assert len(barge_ins) == 1


def test_interrupting_a_question_just_sent_stops_its_answer_before_a_word_of_it_plays() -> None:
    """Stop pressed right after asking, before the server created the answer: it is cancelled as it is created,
    as it was when an earlier reply was still playing, instead of playing in full."""
    clock = VirtualClock()

    async def main() -> tuple[Any, list[Any]]:
        async with _session(clock) as session:
            await session.send_text("tell me something long")
            stopped = await session.interrupt()
            await clock.sleep(3.0)
            return stopped, session.pending_events()

    stopped, events = run_lockstep(main(), clock)
    assert stopped is not None and stopped.cancelled and stopped.item_id is None and stopped.heard_ms == 0.0
    assert not any(type(e).__name__ == "AssistantAudioStarted" for e in events), events
    [finished] = [e for e in events if type(e).__name__ == "ResponseFinished"]
    assert finished.status == "cancelled"


def test_an_update_refused_changes_nothing_and_later_updates_go_through() -> None:
    clock = VirtualClock()

    async def main() -> list[str]:
        refused = []
        async with _session(clock) as session:
            for bad in ({"instructions": 5}, {"voice": ["alloy"]}, {"tools": "abc"}):
                with pytest.raises(ConfigurationError) as exc:
                    await session.update(**bad)
                refused.append(str(exc.value))
            await session.update(instructions="Be brief.")
            await clock.sleep(0.2)
            assert session.settings.instructions == "Be brief." and session.settings.voice == SETTINGS.voice
            errors = [e for e in session.pending_events() if isinstance(e, SessionError)]
            assert errors == [], errors
        return refused

    assert run_lockstep(main(), clock) == ["instructions takes a string, not int", "voice takes a string, not list",
                                           "tools takes a list of the registry's tool names"]


async def _async_observer(*_args: Any) -> None:
    pass


def test_false_turns_echo_cancellation_and_the_local_vad_off_as_none_does() -> None:
    VoiceSession(SETTINGS, aec=False, local_vad=False)


@pytest.mark.parametrize(("given", "message"), [
    ({"settings": {"url": "ws://x"}}, "settings takes a SessionSettings, not dict"),
    ({"output": "speaker"}, "output takes an output (ClockedOutput, SpeakerSink, or an object with playout, now() "
                            "and discard_pending()), not str"),
    ({"clock": "real"}, "clock takes a Clock (RealClock, VirtualClock), not str"),
    ({"tools": {"a": 1}}, "tools takes a ToolRegistry, not dict"),
    ({"approve": "yes"}, "approve takes a function of the call (async or not) that returns True to run it, not str"),
    ({"on_wire": "x"}, "on_wire takes a plain (not async) function of (direction, text), called for every frame, not str"),
    ({"barge_policy": "x"}, "barge_policy takes a BargePolicy, not str"),
    ({"on_wire": _async_observer}, "on_wire takes a plain (not async) function of (direction, text), called for "
                                   "every frame, not an async function"),  # before, accepted and never run
    ({"backoff": _async_observer}, "backoff takes a plain (not async) function of the attempt number that returns "
                                   "seconds to wait, not an async function"),
    # before, taken, and the microphone failed at its first block ("'bool' object has no attribute 'process'")
    ({"aec": True}, "aec takes a backend's name ('webrtc', 'speex') or an echo canceller (an object with "
                    "process(mic, ref)), not bool"),
    ({"local_vad": True}, "local_vad takes a backend's name ('webrtc', 'silero') or a LocalVad, not bool"),
    ({"watch_devices": 5}, "watch_devices takes the speakers and microphones to watch (SpeakerSink, MicSource), "
                           "in a list, not int"),
    ({"watch_devices": [object()]}, "watch_devices takes the speakers and microphones to watch (SpeakerSink, "
                                    "MicSource), in a list, not a list holding object"),
])
def test_a_wrong_argument_is_refused_by_the_constructor(given: dict[str, Any], message: str) -> None:
    settings = given.pop("settings", SETTINGS)
    with pytest.raises(TypeError) as refused:
        VoiceSession(settings, **given)
    assert str(refused.value) == f"VoiceSession: {message}"


def test_releasing_push_to_talk_unpressed_sends_nothing_and_text_must_be_text() -> None:
    clock = VirtualClock()

    async def main() -> list[Any]:
        async with _session(clock) as session:  # turn_detection none: push-to-talk
            await session.stop_talking()
            await session.stop_talking()
            with pytest.raises(ConfigurationError, match="send_text takes a string, not NoneType"):
                await session.send_text(None)  # type: ignore[arg-type]
            await clock.sleep(1.0)
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert not [e for e in events if isinstance(e, SessionError)], events  # no empty commit refused
    assert not [e for e in events if type(e).__name__ == "ResponseStarted"]  # and no reply to nothing


def test_a_push_to_talk_tap_is_said_and_asks_nothing_and_the_next_turn_is_answered() -> None:
    """Enter pressed twice in quick succession: 40 ms of audio. Before, the session committed it, the server
    refused (``input_audio_buffer_commit_empty``) and the response asked with it answered nothing said."""
    clock = VirtualClock()
    wire: list[dict[str, Any]] = []

    async def noise() -> AsyncIterator[np.ndarray]:
        rng = np.random.default_rng(7)
        while True:
            await clock.sleep(0.02)
            yield rng.integers(-8000, 8000, 480).astype(np.int16)

    async def main() -> tuple[list[Any], list[Any]]:
        async with _session(clock, input=noise(),
                            on_wire=lambda d, t: wire.append(json.loads(t)) if d == "out" else None) as session:
            await clock.sleep(0.5)
            await session.start_talking()
            await clock.sleep(0.04)
            await session.stop_talking()
            await clock.sleep(1.0)
            tapped = session.pending_events()
            await session.start_talking()
            await clock.sleep(0.3)
            await session.stop_talking()
            await clock.sleep(1.0)
            return tapped, session.pending_events()

    tapped, spoken = run_lockstep(main(), clock)
    assert [(e.code, e.message) for e in tapped if isinstance(e, SessionError)] == [
        ("turn_too_short", "push-to-talk: a turn of 40 ms is too short to send (at least 100 ms of audio): it was "
                           "dropped, and nothing was asked")]
    assert not [e for e in tapped if type(e).__name__ == "ResponseStarted"]
    assert not [e for e in spoken if isinstance(e, SessionError)]
    assert [type(e).__name__ for e in spoken].count("ResponseStarted") == 1  # the turn said after it is answered
    assert [e["type"] for e in wire].count("input_audio_buffer.commit") == 1


@pytest.mark.parametrize(("given", "message"), [
    ({"modle": "gpt-realtime"}, "SessionSettings(modle): not a setting (did you mean 'model'?)"),
    ({"silence_ms": -1}, "SessionSettings(silence_ms=-1): Input should be greater than or equal to 0"),
    ({"transport": "tcp"}, "SessionSettings(transport='tcp'): Input should be 'ws' or 'webrtc'"),
    ({"liveness_timeout_s": float("nan")}, "SessionSettings(liveness_timeout_s=nan): Input should be a finite number"),
    ({"vad_threshold": float("nan")}, "SessionSettings(vad_threshold=nan): Input should be a finite number"),
    # before, taken: a liveness of a nanosecond gave up on every answer the server owed, reconnecting each time,
    # and True counted as 1 attempt
    ({"liveness_timeout_s": 1e-9}, "SessionSettings(liveness_timeout_s=1e-09): is 0 (never) or at least 1 s: a server "
                                   "silent for less is still answering"),
    ({"reconnect_attempts": True}, "SessionSettings(reconnect_attempts=True): takes a number, not True"),
    ({"vad_threshold": False}, "SessionSettings(vad_threshold=False): takes a number, not False"),
    ({"silence_ms": 10**20}, "SessionSettings(silence_ms=100000000000000000000): Input should be less than or equal "
                             "to 60000"),  # before, the server refused the update and the session ran on its defaults
    ({"api_key": "sk-\ud800"}, "SessionSettings(api_key): api_key cannot be sent: it holds a lone surrogate, half of "
                                "a character"),
    ({"instructions": "caf\ud83d"}, "SessionSettings(instructions='caf\\ud83d'): instructions cannot be sent: "
                                       "character 3 is a lone surrogate ('\\ud83d'), half of a character"),
    # a URL the session could never open, said as the command line says it (before: "no API key for 127.0.0.1:8765")
    ({"url": "127.0.0.1:8765/v1"}, "SessionSettings(url='127.0.0.1:8765/v1'): a URL without a scheme; did you mean "
                                   "ws://127.0.0.1:8765/v1?"),
    ({"url": "api.example.com/v1?api_key=sk-abcdefgh1234"}, "SessionSettings(url='api.example.com/v1?api_key=[redacted]'"
                                                            "): a URL without a scheme; did you mean "
                                                            "wss://api.example.com/v1?api_key=[redacted]?"),
    ({"url": "ftp://example.com"}, "SessionSettings(url='ftp://example.com'): not a Realtime URL: give ws://, wss://, "
                                   "http:// or https:// and a host"),
    ({"url": "//127.0.0.1:8765/v1"}, "SessionSettings(url='//127.0.0.1:8765/v1'): a URL without a scheme; did you mean "
                                     "ws://127.0.0.1:8765/v1?"),
])
def test_settings_refuse_a_misspelt_name_or_a_bad_value_in_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        SessionSettings(**given)
    assert str(refused.value) == message
    assert isinstance(refused.value, ConfigurationError)  # the project's own tree, not pydantic's


@pytest.mark.parametrize(("name", "value", "message"), [
    # before, each was taken as it was: the first ended the session's open in an UnboundLocalError
    ("turn_detection", "push-to-talk", "SessionSettings(turn_detection='push-to-talk'): Input should be 'server_vad', "
                                       "'semantic_vad' or 'none'"),
    ("silence_ms", -5, "SessionSettings(silence_ms=-5): Input should be greater than or equal to 0"),
    ("close_timeout_s", float("nan"), "SessionSettings(close_timeout_s=nan): Input should be a finite number"),
    ("url", "nonsense", "SessionSettings(url='nonsense'): a URL without a scheme; did you mean wss://nonsense?"),
    ("call_id", "", "SessionSettings(call_id=''): String should have at least 1 character"),
    ("voise", "alloy", "SessionSettings(voise): not a setting (did you mean 'voice'?)"),
])
def test_a_setting_changed_after_the_settings_were_made_is_checked_as_one_given(name: str, value: Any,
                                                                                message: str) -> None:
    settings = SessionSettings(url="ws://127.0.0.1:9/v1", turn_detection="none")
    with pytest.raises(SettingsError) as refused:
        setattr(settings, name, value)
    assert str(refused.value) == message
    assert settings.turn_detection == "none" and settings.url == "ws://127.0.0.1:9/v1"  # unchanged
    settings.api_key = "sk-given-later"  # type: ignore[assignment]  # text, kept as a secret
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "sk-given-later"
    assert "sk-given-later" not in repr(settings)


@pytest.mark.parametrize("blank", ["   ", " \t", "\n"])
def test_a_key_variable_of_spaces_is_unset_and_leaves_the_next_one_to_give_the_key(
        monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    # before, a variable of spaces counted: its blank key was sent, and refused by the server as no key at all,
    # while the OPENAI_API_KEY beside it was never read
    for name in ("VOXLINE_API_KEY", "OPENAI_API_KEY", "VOXLINE_TRANSPORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VOXLINE_API_KEY", blank)
    monkeypatch.setenv("VOXLINE_TRANSPORT", blank)  # a blank choice is unset too, not refused
    assert SessionSettings().api_key is None and api_key_from_env() is None
    assert SessionSettings().transport == "ws"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-one")
    key = load_settings().api_key
    assert key is not None and key.get_secret_value() == "sk-the-real-one"
    assert api_key_from_env() == "sk-the-real-one"


def test_a_key_given_as_spaces_is_refused_in_words_the_redaction_leaves_whole() -> None:
    with pytest.raises(SettingsError) as refused:
        SessionSettings(api_key="  ")
    assert str(refused.value) == "SessionSettings(api_key): is blank: give the key, or leave it out"
    with pytest.raises(UsageError) as flagged:  # "--api-key: is…" read as a key, and its first word was redacted
        load_settings(api_key="  ")
    assert str(flagged.value) == "--api-key — is blank: give the key, or leave it out"
    with pytest.raises(UsageError) as misspelt:
        load_settings(apikey="sk-abcdefgh")
    assert str(misspelt.value) == "--apikey — not a setting (did you mean 'api_key'?)"


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("input_device", "", "is blank: give a name, or leave it out"),  # before: the first device matched ''
    ("output_device", "   ", "is blank: give a name, or leave it out"),
    ("voice", "", "is blank: give a name, or leave it out"),  # before: sent, for the server to refuse
    ("call_id", "rtc_1\nrtc_2", "holds a control character: 'rtc_1\\nrtc_2'"),  # before: put into the URL as is
    ("transcription_model", "\t", "is blank: give a name, or leave it out"),
    ("output_device", "Speakers\x1b[2J", "holds a control character: 'Speakers\\x1b[2J'"),
])
def test_a_name_that_is_blank_or_not_one_line_is_refused(field: str, value: str, problem: str) -> None:
    with pytest.raises(SettingsError) as refused:
        SessionSettings(**{field: value})
    assert refused.value.problem == problem
    with pytest.raises(UsageError, match=f"^--{field.replace('_', '-')}="):
        load_settings(**{field: value})
    assert getattr(SessionSettings(**{field: "pulse"}), field) == "pulse"


def test_instructions_too_large_for_their_update_are_refused_when_the_settings_are_made() -> None:
    with pytest.raises(SettingsError) as refused:  # before, the update was refused and the session ran on defaults
        SessionSettings(instructions='"' * (9 * 1024 * 1024))  # 9 MiB of text, 18 as JSON: each quote is escaped
    assert refused.value.problem == ("instructions are 18874370 bytes as JSON, and the session.update that carries "
                                     "them leaves room for at most 16842752")
    # the value is shown as much as a line holds (before, all 9 MiB of it were in the message)
    assert str(refused.value) == ("SessionSettings(instructions=" + repr('"' * 80) + "… (9437184 long)): "
                                  + refused.value.problem)


def test_an_unknown_voxline_variable_in_the_environment_is_not_a_setting_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXLINE_NOT_A_SETTING", "1")  # other tools share the prefix (VOXLINE_BENCH_OUT…)
    monkeypatch.setenv("VOXLINE_SILENCE_MS", "700")
    assert SessionSettings().silence_ms == 700


@pytest.mark.parametrize(("given", "error", "message"), [
    ({"resume": "no"}, TypeError, "resume takes True or False, not str"),
    ({"grace_s": "1"}, TypeError, "grace_s takes a number, not str"),
    ({"grace_s": float("nan")}, ValueError, "grace_s takes a finite number, not nan"),
])
def test_a_barge_policy_takes_a_flag_and_a_number(given: dict[str, Any], error: type[Exception], message: str) -> None:
    from voxline.session import BargePolicy

    with pytest.raises(error) as refused:
        BargePolicy(**given)
    assert str(refused.value) == message


def test_an_update_the_server_refuses_is_undone_so_later_updates_and_reconnects_do_not_resend_it() -> None:
    clock = VirtualClock()
    sent: list[dict[str, Any]] = []

    async def main() -> tuple[list[SessionError], str | None, str | None]:
        connect = engine_connector(load_scenario("default"), clock, voice="tone",
                                   on_wire=lambda d, t: sent.append(json.loads(t)) if d == "out" else None)
        async with VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=connect) as session:
            await session.send_text("Hello")  # the assistant speaks: its voice is fixed from now on
            await clock.sleep(1.0)
            await session.update(voice="ash", instructions="Be brief.")  # refused whole by the service
            await clock.sleep(0.2)
            voice, instructions = session.settings.voice, session.settings.instructions
            await session.update(instructions="Be kind.")  # goes through: the refused voice is not in it
            await clock.sleep(0.2)
            errors = [e for e in session.pending_events() if isinstance(e, SessionError)]
        return errors, voice, instructions

    errors, voice, instructions = run_lockstep(main(), clock)
    assert [e.code for e in errors] == ["cannot_update_voice"]  # the refusal, once; the later update is accepted
    assert voice == SETTINGS.voice and instructions == SETTINGS.instructions  # the refused update undone whole
    updates = [e["session"] for e in sent if e.get("type") == "session.update"]
    assert updates[-1]["instructions"] == "Be kind." and "voice" not in updates[-1]["audio"]["output"]


def _updates_in_a_row(calls: list[dict[str, str]]) -> tuple[list[str | None], str | None, str | None,
                                                              list[dict[str, Any]]]:
    """``calls`` to update(), one right after another once the assistant has spoken (its voice fixed from then on):
    the errors the app is told, the voice and instructions the settings end with, and the updates sent."""
    clock = VirtualClock()
    sent: list[dict[str, Any]] = []

    async def main() -> tuple[list[str | None], str | None, str | None]:
        connect = engine_connector(load_scenario("default"), clock, voice="tone",
                                   on_wire=lambda d, t: sent.append(json.loads(t)) if d == "out" else None)
        async with VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=connect) as session:
            await session.send_text("Hello")
            await clock.sleep(1.0)
            for call in calls:
                await session.update(**call)  # none waits for the one before to be answered
            await clock.sleep(0.5)
            codes = [e.code for e in session.pending_events() if isinstance(e, SessionError)]
            return codes, session.settings.voice, session.settings.instructions

    codes, voice, instructions = run_lockstep(main(), clock)
    return codes, voice, instructions, [e["session"] for e in sent if e.get("type") == "session.update"]


def test_an_update_made_while_a_refused_one_is_on_its_way_goes_through_without_the_refused_value() -> None:
    """Each update carries the whole configuration: one sent before an earlier, refused one was answered carried the
    refused voice and was refused for it, and undone: the app's valid change was lost, never sent again, and it was
    told of two refusals for one mistake. Now one update is on the wire at a time; what is made meanwhile goes next."""
    codes, voice, instructions, updates = _updates_in_a_row([{"voice": "ash"}, {"instructions": "Be kind."}])
    assert codes == ["cannot_update_voice"]  # the app's one mistake, said once
    assert voice == SETTINGS.voice and instructions == "Be kind."
    assert updates[-1]["instructions"] == "Be kind." and "voice" not in updates[-1]["audio"]["output"]


def test_two_refused_voices_in_a_row_leave_the_voice_the_server_has() -> None:
    """The second refused voice was undone to the first, itself refused: every later update and reconnect sent it."""
    codes, voice, _instructions, updates = _updates_in_a_row([{"voice": "ash"}, {"voice": "verse"}])
    assert codes == ["cannot_update_voice", "cannot_update_voice"]
    assert [u["audio"]["output"].get("voice") for u in updates[1:]] == ["ash", "verse"]  # each sent once, alone
    assert voice == SETTINGS.voice


@pytest.mark.parametrize("url", ["ws://127.0.0.1:9/v1\n", "wss://api.openai.com/v1 ", "ws://host/v1\x00"])
def test_a_url_with_a_line_break_or_a_space_is_refused_when_the_settings_are_made(url: str) -> None:
    """A URL read from a file with its line break: accepted (a URL parser drops it), and the dial then failed."""
    with pytest.raises(SettingsError, match="it holds a space, a line break or another control character"):
        SessionSettings(api_key="k", url=url)


def test_a_bad_value_from_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXLINE_TRANSPORT", "tcp")
    with pytest.raises(SettingsError) as refused:
        SessionSettings()
    assert str(refused.value) == "VOXLINE_TRANSPORT='tcp': Input should be 'ws' or 'webrtc'"
    assert refused.value.variable == "VOXLINE_TRANSPORT"
    with pytest.raises(SettingsError) as given:  # given as an argument: the argument is named
        SessionSettings(transport="udp")  # type: ignore[arg-type]
    assert str(given.value) == "SessionSettings(transport='udp'): Input should be 'ws' or 'webrtc'"


@pytest.mark.parametrize("variable", ["VOXLINE_URL", "OPENAI_BASE_URL"])
def test_a_bad_url_from_the_environment_names_its_variable_and_never_its_key(monkeypatch: pytest.MonkeyPatch,
                                                                             variable: str) -> None:
    """Before: 'VOXLINE_VOXLINE_URL=...', and the error's value kept the key (only the message was masked)."""
    monkeypatch.delenv("VOXLINE_URL", raising=False)
    monkeypatch.setenv(variable, "ftp://user:sk-CANARY1234567890@example.com/v1")
    with pytest.raises(SettingsError) as refused:
        SessionSettings()
    error = refused.value
    assert (error.field, error.variable) == ("url", variable)
    assert str(error) == (f"{variable}='ftp://[redacted]@example.com/v1': not a Realtime URL: give ws://, wss://, "
                          "http:// or https:// and a host")
    assert "CANARY" not in repr(error.value) and "CANARY" not in repr(error.args)


def test_after_a_refused_update_and_a_drop_the_new_connection_is_configured_without_it() -> None:
    clock = VirtualClock()
    sent: list[dict[str, Any]] = []
    opened: list[RealtimeConnection] = []
    connect = engine_connector(load_scenario("default"), clock, voice="tone",
                               on_wire=lambda d, t: sent.append(json.loads(t)) if d == "out" else None)

    async def counted() -> RealtimeConnection:
        opened.append(conn := await connect())
        return conn

    async def main() -> tuple[list[str | None], int]:
        async with VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=counted) as session:
            await session.send_text("Hello")
            await clock.sleep(1.0)
            await session.update(voice="ash", instructions="Be brief.")  # refused: the assistant has spoken
            await clock.sleep(0.2)
            first = len(sent)
            await opened[0].transport.close(1006, "connection reset")  # the network drops
            await clock.sleep(5.0)
            assert len(opened) == 2 and session.connected
            return [e.code for e in session.pending_events() if isinstance(e, SessionError)], first

    codes, first = run_lockstep(main(), clock)
    assert codes == ["cannot_update_voice"]  # the new connection's configuration was accepted
    again = [e["session"] for e in sent[first:] if e.get("type") == "session.update"]
    assert again and all("voice" not in s["audio"]["output"] and "instructions" not in s for s in again)


def test_an_apps_connector_that_never_returns_costs_a_try_within_the_reconnect_window() -> None:
    """A connector that hung after a drop held the session reconnecting for ever: reconnect_window_s bounded only
    the waits between tries, never a try."""
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def hangs_after_the_first() -> RealtimeConnection:
        if opened:
            await clock.sleep(3600.0)
        opened.append(conn := await connect())
        return conn

    settings = SETTINGS.model_copy(update={"reconnect_attempts": 2, "reconnect_window_s": 2.0})

    async def main() -> tuple[list[SessionError], float]:
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock,
                                connector=hangs_after_the_first) as session:
            await opened[0].transport.close(1006, "connection reset")  # the network drops
            dropped, seen = clock.now(), []
            while not any(isinstance(e, SessionError) and e.fatal for e in seen) and clock.now() - dropped < 60:
                await clock.sleep(0.1)
                seen += session.pending_events()
            return [e for e in seen if isinstance(e, SessionError)], clock.now() - dropped

    errors, took = run_lockstep(main(), clock)
    assert errors[-1].code == "connection_lost" and errors[-1].fatal
    assert any("no connection within" in e.message for e in errors if e.code == "reconnect_failed")
    assert took <= 2.5  # the window, on the session's clock


def test_a_connection_that_fails_while_configured_is_closed_and_the_session_may_open_again() -> None:
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def breaks_once() -> RealtimeConnection:
        conn = await connect()
        opened.append(conn)
        if len(opened) == 1:
            async def flush() -> None:
                raise ConnectionClosed(1006, "gone while being configured")
            conn.flush = flush  # type: ignore[method-assign]
        return conn

    async def main() -> str:
        session = VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=breaks_once)
        with pytest.raises(ConnectionFailed) as failed:
            async with session:
                pass
        async with session:  # a session that never opened opens on a second try
            assert session.connected
        return str(failed.value)

    message = run_lockstep(main(), clock)
    assert message == "the server closed the connection while it was being set up (1006 gone while being configured)"
    assert len(opened) == 2 and all(conn.closed for conn in opened)  # the failed one was closed, not left open


def test_two_open_sessions_cannot_share_one_output() -> None:
    clock = VirtualClock()
    connect = engine_connector(load_scenario("default"), clock, voice="tone")
    shared = ClockedOutput(clock)

    async def main() -> str:
        first = VoiceSession(SETTINGS, output=shared, clock=clock, connector=connect)
        second = VoiceSession(SETTINGS, output=shared, clock=clock, connector=connect)
        async with first:
            with pytest.raises(ConfigurationError) as refused:
                async with second:
                    pass
            await first.send_text("tell me something long")
            async for event in first:
                if type(event).__name__ == "AssistantAudioStarted":
                    break  # closed mid-reply, with the rest of it queued
        assert shared.playout.queued_samples == 0  # not left for the next session to play
        async with second:  # one after the other, it is the next session's
            assert second.connected
        return str(refused.value)

    assert run_lockstep(main(), clock) == ("this output belongs to a session that is open: give each session its own "
                                           "(one output is one listener's timeline)")


@pytest.mark.parametrize("part", ["mirror", "local_vad"])
def test_two_open_sessions_cannot_share_a_mirror_or_a_voice_detector(part: str) -> None:
    """A mirror is one conversation (another session's turns would be sent into this one's on a reconnect), a
    voice detector one microphone's state: refused as a shared output is, with nothing of the refused session's
    left claimed."""
    from voxline.audio.local_vad import LocalVad
    from voxline.session.mirror.mirror import ConversationMirror

    clock = VirtualClock()
    connect = engine_connector(load_scenario("default"), clock, voice="tone")
    shared = {"mirror": ConversationMirror(), "local_vad": LocalVad("webrtc")}[part]
    own_output = ClockedOutput(clock)

    async def main() -> str:
        first = VoiceSession(SETTINGS, clock=clock, connector=connect, **{part: shared})
        second = VoiceSession(SETTINGS, output=own_output, clock=clock, connector=connect, **{part: shared})
        async with first:
            with pytest.raises(ConfigurationError) as refused:
                async with second:
                    pass
            async with VoiceSession(SETTINGS, output=own_output, clock=clock, connector=connect) as third:
                assert third.connected  # the refused session claimed nothing
        async with second:  # one after the other, it is the next session's
            assert second.connected
        return str(refused.value)

    what = {"mirror": "mirror", "local_vad": "voice detector (local_vad)"}[part]
    assert run_lockstep(main(), clock).startswith(f"this {what} belongs to a session that is open: give each session "
                                                  "its own (")


def test_a_session_refused_its_parts_lets_go_of_none_of_the_owners_on_its_close() -> None:
    """Closing a session whose open was refused (or that never opened) frees nothing: the open session's output
    and mirror stay its own, and what it queued to play stays queued."""
    from voxline.session.mirror.mirror import ConversationMirror

    clock = VirtualClock()
    connect = engine_connector(load_scenario("default"), clock, voice="tone")
    output, mirror = ClockedOutput(clock), ConversationMirror()

    async def main() -> tuple[int, int, int]:
        first = VoiceSession(SETTINGS, output=output, mirror=mirror, clock=clock, connector=connect)
        async with first:
            await first.send_text("tell me something long")
            async for event in first:
                if type(event).__name__ == "AssistantAudioStarted":
                    break
            refused = 0
            for parts in ({"output": output}, {"mirror": mirror}):
                second = VoiceSession(SETTINGS, clock=clock, connector=connect, **parts)  # type: ignore[arg-type]
                try:
                    await second.__aenter__()
                except ConfigurationError:
                    refused += 1
                finally:
                    await second.aclose()
                await VoiceSession(SETTINGS, clock=clock, connector=connect).aclose()  # never opened
            still = 0
            for parts in ({"output": output}, {"mirror": mirror}):  # a third is refused them as well
                with pytest.raises(ConfigurationError):
                    async with VoiceSession(SETTINGS, clock=clock, connector=connect, **parts):  # type: ignore[arg-type]
                        pass
                still += 1
            return refused, still, output.playout.queued_samples

    refused, still, queued = run_lockstep(main(), clock)
    assert (refused, still) == (2, 2) and queued > 0  # before: the first close freed both, and emptied the playout


def test_after_a_fatal_error_the_session_says_it_failed_and_refuses_commands() -> None:
    from voxline.audio.sinks import NullSink

    clock = VirtualClock()
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    class FullDisk(NullSink):
        def write(self, t: float, samples: Any) -> None:
            if t >= 0.5:
                raise OSError(28, "No space left on device")

    async def main() -> tuple[str, bool, str]:
        session = VoiceSession(SETTINGS, output=ClockedOutput(clock, FullDisk()), clock=clock, connector=connect)
        async with session:
            async for event in session:
                if isinstance(event, SessionError) and event.fatal:
                    break
            with pytest.raises(ConfigurationError) as refused:
                await session.send_text("still there?")  # before, accepted and never answered
            return repr(session), session.connected, str(refused.value)

    shown, connected, refused = run_lockstep(main(), clock)
    assert shown.endswith(" failed>") and not connected
    assert refused == ("the session failed (the output failed: OSError: [Errno 28] No space left on device): "
                       "close it and open a new one")


@pytest.mark.parametrize("observed", [False, True])
def test_a_connector_that_is_not_async_is_one_line_at_open(observed: bool) -> None:
    clock = VirtualClock()

    def plain() -> None:  # forgot the async, and the return
        return None

    async def main() -> str:
        session = VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock, connector=plain,  # type: ignore[arg-type]
                               on_wire=(lambda d, t: None) if observed else None)
        with pytest.raises(ConfigurationError) as refused:
            async with session:
                pass
        return str(refused.value)

    assert run_lockstep(main(), clock) == ("the connector returned NoneType, not an awaitable: make it an async "
                                           "function that returns a RealtimeConnection")


def test_closing_does_not_wait_for_an_input_that_ignores_its_cancel() -> None:
    """A device wrapper with a bare ``except`` swallows the cancel: before, the close waited for it for ever."""
    clock = VirtualClock()
    swallowed = []

    async def sloppy() -> AsyncIterator[Any]:
        for _ in range(1_000):  # 20 s of blocks, whatever it is told
            try:
                await clock.sleep(0.02)
            except BaseException as exc:  # noqa: BLE001  # the app's bug under test
                swallowed.append(type(exc).__name__)
            yield np.zeros(480, dtype=np.int16)

    async def main() -> tuple[float, float]:
        session = _session(clock, input=sloppy())
        await session.__aenter__()
        await clock.sleep(0.5)
        began = clock.now()
        await session.aclose()
        return began, clock.now()

    began, closed = run_lockstep(main(), clock)
    assert swallowed[:1] == ["CancelledError"] and closed - began < 1.0  # let go after LET_GO_S (0.5 s), not 20 s


def test_an_input_that_closes_its_own_session_closes_it_whole() -> None:
    """Before, the close cancelled the iterator that asked for it midway: the events never ended, and a second
    aclose() returned at once with the session half closed."""
    clock = VirtualClock()
    holder: list[VoiceSession] = []

    async def closes_after_a_while() -> AsyncIterator[Any]:
        for _ in range(10):
            await clock.sleep(0.02)
            yield np.zeros(480, dtype=np.int16)
        await holder[0].aclose()  # a "hang up" gesture read from the same device
        yield np.zeros(480, dtype=np.int16)

    async def main() -> tuple[list[Any], bool]:
        session = _session(clock, input=closes_after_a_while())
        holder.append(session)
        async with session, asyncio.timeout(20):  # real time: before, this waited for ever
            events = [event async for event in session]  # ends: the session closed
            return events, session.connected

    events, connected = run_lockstep(main(), clock)
    assert not connected and not any(isinstance(e, SessionError) for e in events)


def test_a_close_cancelled_midway_still_finishes_and_a_second_close_waits_for_it() -> None:
    """A kiosk's timeout around ``aclose()``: before, the cancelled close stopped in the close handshake, the retry
    returned at once, and the output stayed claimed (with the tool runner and the session's tasks still open)."""
    clock = VirtualClock()
    shared = ClockedOutput(clock)
    connect = engine_connector(load_scenario("long"), clock, voice="tone")

    async def main() -> tuple[bool, bool, bool]:
        session = VoiceSession(SETTINGS, output=shared, clock=clock, connector=connect)
        await session.__aenter__()
        await session.send_text("tell me something long")
        async for event in session:
            if type(event).__name__ == "AssistantAudioStarted":
                break  # closed mid-reply
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)  # the close has begun
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        await session.aclose()  # waits for the close begun first
        tasks_left = any(not task.done() for task in session._tasks)
        async with VoiceSession(SETTINGS, output=shared, clock=clock, connector=connect) as again:
            reopened = again.connected  # the output was let go of
        return tasks_left, session.connected, reopened

    tasks_left, connected, reopened = run_lockstep(main(), clock)
    assert not tasks_left and not connected and reopened


def test_on_wire_with_a_connector_sees_every_frame_and_tools_may_come_from_a_generator() -> None:
    """Before, ``on_wire`` was dropped when a connector was given, and ``update(tools=<generator>)`` offered no
    tool: the check that they were strings used the generator up."""
    clock = VirtualClock()
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    @registry.tool
    def get_time() -> str:
        """The time."""
        return "noon"

    frames: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        async with _session(clock, tools=registry, on_wire=lambda d, text: frames.append((d, json.loads(text)))) as s:
            await s.update(tools=(name for name in ["get_weather", "get_time"]))
            await clock.sleep(0.2)
            with pytest.raises(ConfigurationError, match="no such tool: nope"):
                await s.update(tools=iter(["nope"]))
            with pytest.raises(ConfigurationError, match="tools names get_time more than once"):
                await s.update(tools=["get_time", "get_weather", "get_time"])
            with pytest.raises(ConfigurationError, match="tools takes a list of the registry's tool names, not int"):
                await s.update(tools=5)  # type: ignore[arg-type]

    run_lockstep(main(), clock)
    assert {d for d, _ in frames} == {"in", "out"}  # the observer saw both ways
    updates = [e for d, e in frames if d == "out" and e["type"] == "session.update"]
    assert [t["name"] for t in updates[-1]["session"]["tools"]] == ["get_weather", "get_time"]


def test_a_close_that_fails_is_raised_to_its_caller_logged_once_and_a_second_close_is_quiet(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock()

    class StuckPlayout(PlayoutBuffer):
        def clear(self) -> None:  # the last step of the teardown
            raise OSError("the sink went away")

    output = ClockedOutput(clock, playout=StuckPlayout())

    async def main() -> str:
        session = VoiceSession(SETTINGS, output=output, clock=clock,
                               connector=engine_connector(load_scenario("default"), clock, voice="tone"))
        await session.__aenter__()
        with pytest.raises(OSError) as failed:
            await session.aclose()
        await session.aclose()  # closed already: nothing to raise again
        return str(failed.value)

    with caplog.at_level(logging.ERROR, logger="voxline.session"):
        assert run_lockstep(main(), clock) == "the sink went away"
    assert [r.getMessage() for r in caplog.records if "closing the session failed" in r.getMessage()] == [
        "closing the session failed: OSError: the sink went away"]


def test_a_recording_given_to_a_second_session_is_refused_in_one_line() -> None:
    """A recording is read once: the second session read nothing, and said nothing."""
    from voxline.audio.recording import Recording

    recording = Recording(np.zeros(4800, np.int16), clock=VirtualClock())
    from voxline.base.errors import AudioError

    with pytest.raises(AudioError):
        VoiceSession(SETTINGS, input=recording, aec="bogus")  # refused once the input was looked at: it took nothing
    VoiceSession(SETTINGS, input=recording)
    with pytest.raises(ConfigurationError, match="^this Recording is already another session's input"):
        VoiceSession(SETTINGS, input=recording)


async def test_a_connector_that_raises_systemexit_on_open_raises_it_to_the_opener_and_the_loop_goes_on() -> None:
    """The open runs in a task of its own (so that aclose() can stop it): a SystemExit ending that task would have
    stopped the event loop under the application instead of reaching the task that opened the session."""
    async def connector() -> RealtimeConnection:
        raise SystemExit("the connector gave up")

    session = VoiceSession(SETTINGS, output=ClockedOutput(VirtualClock()), connector=connector)
    with pytest.raises(SystemExit, match="the connector gave up"):
        async with session:
            pass
    await asyncio.sleep(0)  # still running: the loop was not stopped


def test_a_recording_of_a_session_whose_open_failed_is_given_back_at_its_close(tmp_path: Any) -> None:
    """After an open that failed and aclose(), the recording, never read, stayed claimed: no other session could
    take it, and its file stayed open until the garbage collector came. It is the caller's again: another session
    takes it, and reads it to its end."""
    from voxline.audio.recording import Recording
    from voxline.audio.wavio import write_wav

    path = tmp_path / "said.wav"
    write_wav(path, np.zeros(24_000, np.int16))
    clock = VirtualClock()
    recording = Recording(path, clock=clock)

    async def refused() -> RealtimeConnection:
        raise ConnectionFailed("nothing listens there")

    async def main() -> None:
        session = VoiceSession(SETTINGS, input=recording, output=ClockedOutput(clock), clock=clock, connector=refused)
        with pytest.raises(ConnectionFailed):
            async with session:
                pass
        assert _open_in_this_process(path) and recording.due is not None  # the session may be opened again: kept
        await session.aclose()
        assert not recording.claimed and recording.due is not None
        again = VoiceSession(SETTINGS, input=recording, output=ClockedOutput(clock), clock=clock,
                             connector=engine_connector(load_scenario("default"), clock, voice="tone"))
        async with again:
            await clock.sleep(1.5)

    run_lockstep(main(), clock)
    assert recording.due is None and not _open_in_this_process(path)  # read to its end, and let go of


def _open_in_this_process(path: Any) -> bool:
    fds = "/proc/self/fd"
    return any(os.path.realpath(os.path.join(fds, fd)) == str(path) for fd in os.listdir(fds))


def test_a_caller_cancelled_just_as_the_connection_is_made_leaves_no_connection_open() -> None:
    """The open runs as a task of its own: a cancel of the caller landing in the loop pass after it made its
    connection left that connection open, with nothing to close it (``async with`` never calls aclose)."""
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []

    async def main() -> None:
        session = _session(clock, opened)
        made = session._link.open

        async def open_then_cancelled() -> RealtimeConnection:
            conn = await made()
            asyncio.get_running_loop().call_soon(opener.cancel)  # before the opener sees the open is done
            return conn

        session._link.open = open_then_cancelled  # type: ignore[method-assign]
        opener = asyncio.ensure_future(session.__aenter__())
        with pytest.raises(asyncio.CancelledError):
            await opener
        await clock.sleep(3.0)  # past close_timeout_s

    run_lockstep(main(), clock)
    assert len(opened) == 1 and opened[0].closed


def test_a_close_just_as_a_reconnect_made_its_connection_closes_that_connection() -> None:
    """aclose() cancelled the reconnect in the loop pass after its try made a connection: the connection was neither
    taken nor closed."""
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []

    async def main() -> None:
        session = _session(clock, opened)
        async with session:
            made = session._link._configured

            async def made_then_closed() -> RealtimeConnection:
                conn = await made()
                asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(session.aclose()))
                return conn

            session._link._configured = made_then_closed  # type: ignore[method-assign]
            await opened[0].transport.close(1006, "connection reset")  # the network drops: a reconnect
            while len(opened) < 2:
                await clock.sleep(0.05)
            await clock.sleep(3.0)

    run_lockstep(main(), clock)
    assert len(opened) == 2 and all(conn.closed for conn in opened)


def test_devices_that_would_not_start_are_closed_off_the_loop() -> None:
    """A device that would not start failed the open, and its devices were closed on the event loop, where a stuck
    driver's close (up to 2 s each) froze every other session; they close on a thread, as aclose() closes them."""
    import threading

    from voxline.base.clock import RealClock
    from voxline.base.errors import AudioError

    clock = RealClock()
    closed_on: list[threading.Thread] = []

    class WouldNotStart:
        def start(self) -> None:
            raise AudioError("the speaker would not start")

        def close(self) -> None:
            closed_on.append(threading.current_thread())

    async def main() -> None:
        session = VoiceSession(SETTINGS, output=ClockedOutput(clock), clock=clock,
                               connector=engine_connector(load_scenario("default"), clock, voice="tone"))
        session._devices = (WouldNotStart(),)
        with pytest.raises(AudioError, match="^the speaker would not start$"):
            async with session:
                pass
        assert not session.connected

    asyncio.run(main())
    assert len(closed_on) == 1 and closed_on[0] is not threading.main_thread()


def test_on_devices_takes_the_devices_the_settings_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """VOXLINE_INPUT_DEVICE and VOXLINE_OUTPUT_DEVICE (the settings' input_device, output_device) were read by
    `voxline talk` only: a kiosk's on_devices opened the system's default devices in silence."""
    from voxline.audio import devices

    opened: list[tuple[str, object]] = []

    class Opened(Exception):
        pass

    class Speaker:
        def __init__(self, playout: object, device: object = None) -> None:
            opened.append(("output", device))

        def close(self) -> None:
            opened.append(("closed", None))

    speaker = Speaker

    def mic(device: object = None) -> None:
        opened.append(("input", device))
        raise Opened

    monkeypatch.setattr(devices, "SpeakerSink", speaker)
    monkeypatch.setattr(devices, "MicSource", mic)
    monkeypatch.setenv("VOXLINE_INPUT_DEVICE", "vmic")
    monkeypatch.setenv("VOXLINE_OUTPUT_DEVICE", "3")
    with pytest.raises(Opened):
        VoiceSession.on_devices(aec=None, local_vad=None)
    with pytest.raises(Opened):
        VoiceSession.on_devices(SessionSettings(output_device="kiosk"), input_device=0, aec=None, local_vad=None)
    # the speaker opened before a microphone that would not open is closed again
    assert opened == [("output", "3"), ("input", "vmic"), ("closed", None),
                      ("output", "kiosk"), ("input", 0), ("closed", None)]
    with pytest.raises(TypeError, match="^VoiceSession: settings takes a SessionSettings, not dict$"):
        VoiceSession.on_devices({"url": "ws://x"}, aec=None, local_vad=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^VoiceSession.on_devices got 'tool': it takes the constructor's"):
        VoiceSession.on_devices(tool=None, aec=None, local_vad=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="^VoiceSession.on_devices got 'input', 'watch_devices'"):
        VoiceSession.on_devices(input=None, watch_devices=(), aec=None)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="^a session attached to a call"):
        VoiceSession.on_devices(SessionSettings(call_id="rtc_1"), aec=None, local_vad=None)
    assert len(opened) == 6  # each refused before a device was looked up

    class Mic:
        def __init__(self, device: object = None) -> None:
            opened.append(("input", device))

        def blocks(self) -> object:
            return self

        def close(self) -> None:
            opened.append(("mic closed", None))

    monkeypatch.setattr(devices, "MicSource", Mic)
    with pytest.raises(TypeError):  # the constructor refuses what it is given: both devices made are closed
        VoiceSession.on_devices(aec=None, local_vad=None)
    assert opened[6:] == [("output", "3"), ("input", "vmic"), ("closed", None), ("mic closed", None)]


def test_on_devices_passes_on_every_keyword_of_the_constructor_it_does_not_set_itself() -> None:
    import inspect
    from typing import get_type_hints

    from voxline.session.voice import DeviceSessionOptions

    keywords = {name for name, p in inspect.signature(VoiceSession.__init__).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(get_type_hints(DeviceSessionOptions)) == keywords - {"output", "input", "watch_devices"}


def test_an_open_cancelled_while_its_devices_close_still_closes_its_connection() -> None:
    """The devices' close (a stuck driver's 2 s) came before the connection's: a cancel then left the connection
    open and the output claimed, and the session said it was open."""
    import threading

    from voxline.base.clock import RealClock
    from voxline.base.errors import AudioError

    clock = RealClock()
    closing, release = threading.Event(), threading.Event()

    class SlowToClose:
        def start(self) -> None:
            raise AudioError("the speaker would not start")

        def close(self) -> None:
            closing.set()
            release.wait(5)

    async def main() -> None:
        output = ClockedOutput(clock)
        connect = engine_connector(load_scenario("default"), clock, voice="tone")
        session = VoiceSession(SETTINGS, output=output, clock=clock, connector=connect)
        session._devices = (SlowToClose(),)

        async def open_it() -> None:
            async with session:
                pass

        task = asyncio.ensure_future(open_it())
        assert await asyncio.to_thread(closing.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert not session.connected
        async with VoiceSession(SETTINGS, output=output, clock=clock, connector=connect) as again:
            assert again.connected  # the output was given back
    asyncio.run(main())
