"""The reconnect budget (plain numbers), and sessions against servers that never hold a connection."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from tests.support.hostile import run_faulted
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.transports.base import memory_pair
from voxline.session.events import ConnectionLost, ConnectionRestored, SessionError
from voxline.session.input_journal import InputJournal
from voxline.audio.recording import Recording
from voxline.session.lockstep import run_lockstep
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.reconnect import ReconnectBudget
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.peers import AnsweringPeer, StallingPeer, greeting_connector
from voxline.realtime import events as ev


def test_attempts_and_time_are_both_bounded() -> None:
    budget = ReconnectBudget(3, 10.0, backoff=lambda attempt: 1.0)
    budget.lost(0.0, None)
    assert [budget.next_delay(t) for t in (0.0, 1.0, 2.0)] == [1.0, 1.0, 1.0]
    assert budget.next_delay(3.0) is None
    budget = ReconnectBudget(100, 10.0, backoff=lambda attempt: 4.0)
    budget.lost(0.0, None)
    assert budget.next_delay(0.0) == 4.0 and budget.next_delay(4.0) == 4.0
    assert budget.next_delay(8.0) is None  # 12 s would be past the 10 s window


def test_an_async_backoff_is_said_once_as_such_and_its_coroutine_closed_unawaited() -> None:
    """An ``async def`` backoff handed back a coroutine: float() refused it, and the coroutine was left to warn
    'never awaited' whenever it was collected. It is closed here, and the failure says what was wrong."""
    made: list[Any] = []

    async def later(attempt: int) -> float:
        return 1.0

    def backoff(attempt: int) -> Any:
        made.append(later(attempt))
        return made[-1]

    budget = ReconnectBudget(3, 60.0, backoff=backoff)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 'never awaited' warning would fail the test (it is raised at the close)
        delay = budget.next_delay(0.0)
        assert delay is not None and 0 < delay < 1
        assert made[0].cr_frame is None  # closed: nothing of it is left to run, or to warn
    assert budget.backoff_failure == ("TypeError: it is a coroutine function: give a plain function that returns "
                                      "seconds")


def test_a_connection_that_closes_at_once_does_not_refill_the_budget() -> None:
    budget = ReconnectBudget(2, 1000.0, stable_s=30.0, backoff=lambda attempt: 1.0)
    budget.lost(0.0, connected_at=None)
    assert budget.next_delay(0.0) == 1.0
    budget.lost(2.0, connected_at=1.0)  # up for one second: not stable
    assert budget.next_delay(2.0) == 1.0
    budget.lost(4.0, connected_at=3.0)
    assert budget.next_delay(4.0) is None
    budget.lost(100.0, connected_at=50.0)  # a connection that held 50 s starts a fresh budget
    assert budget.next_delay(100.0) == 1.0


def test_a_spent_budget_says_which_limit_ran_out_and_what_a_drop_soon_after_a_restore_got() -> None:
    """A drop soon after a restore that used the tries was fatal at once, said as "(3 tries)": tries it never got."""
    budget = ReconnectBudget(3, 60.0, stable_s=30.0, backoff=lambda attempt: 1.0)
    budget.lost(0.0, connected_at=None)
    assert [budget.next_delay(t) for t in (0.0, 1.0, 2.0)] == [1.0, 1.0, 1.0]
    budget.lost(8.0, connected_at=3.0)  # restored at 3 s, dropped 5 s later
    assert budget.next_delay(8.0) is None
    assert budget.spent(8.0) == ("3 tries in 8.0 s since the first drop; reconnect_attempts is 3; a connection "
                                 "restored in between dropped within reconnect_stable_s (30 s)")
    budget = ReconnectBudget(100, 10.0, backoff=lambda attempt: 4.0)
    budget.lost(0.0, None)
    assert budget.next_delay(0.0) == 4.0 and budget.next_delay(4.0) == 4.0 and budget.next_delay(8.0) is None
    assert budget.spent(8.0) == "2 tries in 8.0 s since the first drop; reconnect_window_s is 10 s"


def test_a_server_that_accepts_and_closes_every_connection_gets_one_fatal_error() -> None:
    clock = VirtualClock()
    opened = 0
    hangups: list[asyncio.Future[None]] = []

    async def connector() -> RealtimeConnection:
        nonlocal opened
        opened += 1
        client, server = memory_pair()
        await server.send(json.dumps({"type": "session.created", "event_id": "e",
                                      "session": {"type": "realtime", "id": "s", "object": "realtime.session"}}))
        if opened == 1:  # the first one holds for a second, every later one hangs up at once
            async def later() -> None:
                await clock.sleep(1.0)
                await server.close(1011, "goodbye")
            hangups.append(asyncio.ensure_future(later()))
        else:
            await server.close(1011, "goodbye")
        return RealtimeConnection(client)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=4, reconnect_window_s=60.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                               backoff=lambda attempt: 0.5)
        events: list[object] = []
        try:
            async with session:
                async for event in session:
                    events.append(event)
        except ConnectionClosed:
            raise AssertionError("a close escaped the session") from None
        return events

    events = run_lockstep(main(), clock)
    fatal = [e for e in events if isinstance(e, SessionError) and e.fatal]
    assert len(fatal) == 1 and "4 tries" in fatal[0].message
    assert opened <= 1 + 4
    assert clock.now() < 60.0
    assert len([e for e in events if isinstance(e, ConnectionLost)]) >= 1


def test_aclose_returns_when_the_server_stops_reading() -> None:
    clock = VirtualClock()

    class Deaf:
        """A transport whose close handshake never completes."""

        media = None

        async def send(self, text: str) -> None:
            pass

        async def recv(self) -> str:
            await asyncio.Event().wait()
            raise AssertionError

        async def close(self, code: int = 1000, reason: str = "") -> None:
            await asyncio.Event().wait()

    async def connector() -> RealtimeConnection:
        return RealtimeConnection(Deaf())

    async def main() -> float:
        settings = SessionSettings(api_key="k", turn_detection="none", close_timeout_s=2.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            start = clock.now()
        return clock.now() - start

    assert run_lockstep(main(), clock) <= 2.0 + 0.05


def _journal_of(seconds: int, captured_s: int) -> tuple[InputJournal, int, np.ndarray]:
    """A journal (300 ms padding) that captured the first ``captured_s`` of ``seconds`` of distinct samples in 20 ms
    blocks; its rate and the samples."""
    journal = InputJournal(padding_ms=300, lead_in_ms=500)
    rate = journal.rate
    audio = (np.arange(seconds * rate) % 1000).astype(np.int16)
    for start in range(0, captured_s * rate, 480):
        journal.captured(audio[start:start + 480])
    return journal, rate, audio


def test_the_journal_resends_the_unfinished_turn_and_keeps_untranscribed_ones() -> None:
    journal, rate, audio = _journal_of(10, 4)
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=1000, item_id="u1"))
    journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=2000, item_id="u1"))
    journal.handle(ev.InputAudioBufferCommitted(item_id="u1"))
    turn = np.frombuffer(journal.audio_of("u1") or b"", dtype="<i2")
    assert np.array_equal(turn, audio[rate:2 * rate])  # audio_start_ms is where the item begins: padding included
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=3000, item_id="u2"))
    resent = journal.resume(push_to_talk=False)  # dropped while the user speaks
    assert np.array_equal(resent, audio[3 * rate:4 * rate])
    # the new connection counts from the first sample sent again
    journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=1300, item_id="u3"))
    journal.handle(ev.InputAudioBufferCommitted(item_id="u3"))
    assert np.array_equal(np.frombuffer(journal.audio_of("u3") or b"", dtype="<i2"), resent[:int(1.3 * rate)])
    journal.handle(ev.ConversationItemInputAudioTranscriptionCompleted(item_id="u1", content_index=0,
                                                                        transcript="hello"))
    assert journal.audio_of("u1") is None  # the transcript will do
    assert journal.sizes()["held"] <= int(1.5 * rate)  # nothing before the last commit is kept


def test_a_second_speech_start_before_a_commit_does_not_lose_the_first() -> None:
    """Two ``speech_started`` with no commit between them: the audio since the first is still the server's
    uncommitted turn, and a drop resends all of it."""
    journal, rate, audio = _journal_of(4, 4)
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=1000, item_id="u1"))
    journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=1800, item_id="u1"))
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=2500, item_id="u2"))
    assert np.array_equal(journal.resume(push_to_talk=False), audio[rate:])


def test_speech_carried_over_from_a_connection_before_does_not_stretch_the_next_turn() -> None:
    """A drop during speech resends it and keeps its start marked; the new connection's VAD never takes it for a
    turn. Its own next start is a turn of its own: a drop during it resends that turn, not everything since the
    old mark, and its committed audio is that turn alone."""
    journal = InputJournal(padding_ms=300, lead_in_ms=500)
    rate = journal.rate
    audio = (np.arange(40 * rate) % 1000).astype(np.int16)

    def at(ms: int) -> int:
        return ms * rate // 1000

    def capture(start_ms: int, end_ms: int) -> None:
        for first in range(at(start_ms), at(end_ms), 480):
            journal.captured(audio[first:min(first + 480, at(end_ms))])

    capture(0, 10_300)
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=10_000, item_id="u1"))
    assert np.array_equal(journal.resume(push_to_talk=False), audio[at(10_000):at(10_300)])
    capture(10_300, 33_300)  # 20 s later the user speaks on the new connection, which counts from 10 s
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=20_300, item_id="u2"))
    assert np.array_equal(journal.resume(push_to_talk=False), audio[at(30_300):at(33_300)])
    capture(33_300, 34_000)  # a third connection, counting from 30.3 s, ends and commits the turn
    journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=3_500, item_id="u2"))
    journal.handle(ev.InputAudioBufferCommitted(item_id="u2"))
    assert np.array_equal(np.frombuffer(journal.audio_of("u2") or b"", dtype="<i2"), audio[at(30_300):at(33_800)])


def test_after_a_hand_over_the_new_connection_counts_from_the_audio_not_yet_sent() -> None:
    journal = InputJournal(padding_ms=0)
    rate = journal.rate
    audio = (np.arange(2 * rate) % 1000).astype(np.int16)
    for start in range(0, 2 * rate, 480):
        journal.captured(audio[start:start + 480])
    journal.restart(unsent=480)  # the last block waits in the chunker: the new connection starts with it
    journal.handle(ev.InputAudioBufferSpeechStarted(audio_start_ms=0, item_id="u1"))
    journal.handle(ev.InputAudioBufferSpeechStopped(audio_end_ms=20, item_id="u1"))
    journal.handle(ev.InputAudioBufferCommitted(item_id="u1"))
    assert np.array_equal(np.frombuffer(journal.audio_of("u1") or b"", dtype="<i2"), audio[-480:])


def test_the_journal_is_bounded() -> None:
    journal = InputJournal(keep_s=2.0, turns_s=3.0)
    rate = journal.rate
    block = np.ones(480, dtype=np.int16)
    for n in range(50 * rate // 480):
        journal.captured(block)
    assert journal.sizes()["held"] <= 2 * rate + 480
    for n in range(10):
        journal.handle(ev.InputAudioBufferCommitted(item_id=f"u{n}"))
        for _ in range(rate // 480):
            journal.captured(block)
    assert journal.sizes()["turn_samples"] <= 3 * rate + 480


def test_send_text_while_reconnecting_is_kept_and_answered() -> None:
    from tests.support.hostile import FAULTS, POINTS

    asked: list[str] = []

    async def ask_while_away(session: VoiceSession, event: object) -> None:
        if isinstance(event, ConnectionLost) and not asked:
            assert not session.connected
            await session.send_text("And tomorrow?")  # queued, not refused
            asked.append("yes")

    network = next(f for f in FAULTS if f.kind == "network")
    outcome = run_faulted(network, POINTS["after response.created"][1], on_event=ask_while_away)
    assert asked
    server = outcome.server_items()
    texts = [p.get("text") for i in server if i.get("role") == "user" for p in i.get("content", [])]
    assert "What is the weather in Paris?" in texts and "And tomorrow?" in texts
    after = server[[i.get("content", [{}])[0].get("text") for i in server].index("And tomorrow?") + 1:]
    assert any(i.get("role") == "assistant" or i.get("type") == "function_call" for i in after)
    assert [m.id for m in outcome.mirror] == [i["id"] for i in server]


def test_a_quiet_first_connection_is_not_taken_for_a_silent_server() -> None:
    """A real clock starts at the machine's uptime, not 0: the watchdog counts from the connect."""
    clock = VirtualClock(start=8700.0)
    client, server = memory_pair()
    opened = 0

    class Answering:
        """The client end, able to ping (the peer is alive and answers at once)."""

        media = None
        send, recv, close = client.send, client.recv, client.close

        async def ping(self) -> None:
            return None

    async def connector() -> RealtimeConnection:
        nonlocal opened
        opened += 1
        return RealtimeConnection(Answering())

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=30.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(5.0)  # the server says nothing at all; a ping would be answered
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert opened == 1 and not [e for e in events if isinstance(e, (ConnectionLost, SessionError))], events


def _silent_server_session(*, created: bool, reconnect_attempts: int, talk: bool, seconds: float
                           ) -> tuple[list[object], list[AnsweringPeer]]:
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []

    async def connector() -> RealtimeConnection:
        peer = AnsweringPeer()
        peers.append(peer)
        if created:
            await peer.server.send(json.dumps(ev.server_event_sample("session.created")))
        return RealtimeConnection(peer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=30.0,
                                   reconnect_attempts=reconnect_attempts)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            if talk:
                await clock.sleep(1.0)
                await session.send_text("anyone there?")
            await clock.sleep(seconds)
            return session.pending_events()

    return run_lockstep(main(), clock), peers


def test_a_server_that_never_sends_session_created_fails_in_bounded_time_though_it_answers_pings() -> None:
    events, peers = _silent_server_session(created=False, reconnect_attempts=1, talk=False, seconds=200.0)
    silent = [e for e in events if isinstance(e, SessionError) and e.code == "server_silent"]
    assert silent and "session.created" in silent[0].message
    assert [e for e in events if isinstance(e, SessionError) and e.fatal], events
    assert len(peers) == 2  # the first connection and the one retry the budget allows, both given up


@pytest.mark.parametrize("says", ["session.updated", "rate_limits.updated"])
def test_a_server_that_talks_but_never_opens_the_session_is_given_up_on(says: str) -> None:
    """Before, a session.updated in place of session.created was taken for it, and events that open nothing kept
    the silence from ever counting: the session waited for ever, its commands held."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    chattering: list[asyncio.Future[None]] = []
    said = json.dumps(ev.server_event_sample(says))

    async def chatter(peer: AnsweringPeer) -> None:
        while True:
            await peer.server.send(said)
            await clock.sleep(1.0)

    async def connector() -> RealtimeConnection:
        peer = AnsweringPeer()
        peers.append(peer)
        chattering.append(asyncio.ensure_future(chatter(peer)))
        return RealtimeConnection(peer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=30.0, reconnect_attempts=1)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(100.0)
        for task in chattering:
            task.cancel()
        return session.pending_events()

    events = run_lockstep(main(), clock)
    silent = [e for e in events if isinstance(e, SessionError) and e.code == "server_silent"]
    assert silent and "the server still owes its session.created 30.0 s after the connect" in silent[0].message, events
    assert len(peers) == 2  # the first connection and the one retry the budget allows, both given up


def test_a_server_that_never_answers_a_response_create_is_a_drop_though_it_answers_pings() -> None:
    events, peers = _silent_server_session(created=True, reconnect_attempts=3, talk=True, seconds=45.0)
    silent = [e for e in events if isinstance(e, SessionError) and e.code == "server_silent"]
    assert silent and "a response" in silent[0].message, events
    assert [e for e in events if isinstance(e, ConnectionLost)]
    assert peers[0].pings >= 1  # its socket did answer


def test_a_quiet_server_that_owes_nothing_is_pinged_now_and_then_and_kept() -> None:
    events, peers = _silent_server_session(created=True, reconnect_attempts=3, talk=False, seconds=300.0)
    assert not [e for e in events if isinstance(e, (ConnectionLost, SessionError))], events
    assert len(peers) == 1 and 1 <= peers[0].pings <= 300 / 15 + 1  # every half liveness timeout, not every watch


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


class _AppStop(BaseException):
    pass


@pytest.mark.parametrize("raised", [ValueError("the app's connector broke"), _Unreadable(), SystemExit(1),
                                    _AppStop("custom")], ids=["ValueError", "unreadable", "SystemExit", "BaseException"])
def test_an_apps_backoff_or_connector_that_raises_costs_one_try_and_one_report_not_the_session(
        raised: BaseException) -> None:
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    calls = 0

    def backoff(attempt: int) -> float:
        raise type(raised)(*raised.args)

    async def connector() -> RealtimeConnection:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise raised
        peer = AnsweringPeer()
        peers.append(peer)
        await peer.server.send(json.dumps(ev.server_event_sample("session.created")))
        return RealtimeConnection(peer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=5)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                               backoff=backoff)
        async with session:
            await clock.sleep(1.0)
            await peers[0].server.close(1011, "gone")
            await clock.sleep(30.0)
            assert session.connected
            return session.pending_events()

    events = run_lockstep(main(), clock)
    codes = [e.code for e in events if isinstance(e, SessionError)]
    assert codes.count("backoff_failed") == 1 and codes.count("reconnect_failed") == 1, events
    assert any(isinstance(e, ConnectionRestored) for e in events) and calls == 3


def test_a_wire_observer_that_raises_is_reported_once_and_the_session_goes_on() -> None:
    clock = VirtualClock(start=100.0)
    peer = AnsweringPeer()

    def observer(direction: str, text: str) -> None:
        raise RuntimeError("observer bug")

    async def connector() -> RealtimeConnection:
        await peer.server.send(json.dumps(ev.server_event_sample("session.created")))
        return RealtimeConnection(peer, on_wire=observer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none")
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await session.send_text("hello")
            await peer.server.send(json.dumps(ev.server_event_sample("session.updated")))
            await clock.sleep(1.0)
            assert session.connected
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert [e.code for e in events if isinstance(e, SessionError)] == ["observer_failed"], events


def _stalling_connector(peers: list[StallingPeer], wrap: Callable[[StallingPeer], Any] = lambda peer: peer
                        ) -> Callable[[], Awaitable[RealtimeConnection]]:
    """A connector of peers whose network can stall (each kept in ``peers``), each saying session.created first."""
    return greeting_connector(peers, StallingPeer, wrap=wrap)


def test_a_server_whose_network_stalls_is_dropped_once_and_commands_meanwhile_are_kept() -> None:
    """The socket stays open and carries nothing: the close sent to the silent server was never answered, so its
    drop waited for the transport's own close timeout; meanwhile the watchdog reported the server again and again,
    and a text the app sent raised 'the connection is closed' instead of being kept for the next connection."""
    clock = VirtualClock(start=100.0)
    peers: list[StallingPeer] = []
    connector = _stalling_connector(peers)

    async def main() -> tuple[list[object], float]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=3.0, close_timeout_s=2.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(1.0)
            peers[0].stall()
            await session.send_text("anyone there?")  # owed a response, which never comes
            events: list[object] = []
            async with asyncio.timeout(60):
                async for event in session:
                    events.append(event)
                    if isinstance(event, SessionError) and event.code == "server_silent":
                        assert not session.connected  # given up on: away from now on, not once the close times out
                        await session.send_text("still there?")  # kept for the next connection, not refused
                    if isinstance(event, ConnectionRestored):
                        return events, clock.now()
        raise AssertionError("the session ended")

    events, restored_at = run_lockstep(main(), clock)
    silent = [e for e in events if isinstance(e, SessionError) and e.code == "server_silent"]
    assert len(silent) == 1 and not [e for e in events if isinstance(e, SessionError) and e.code != "server_silent"]
    assert peers[0].aborts == 1 and restored_at - 100.0 < 1.0 + 3.0 + 2.0 + 2.0  # the stall, liveness, close, a retry
    texts = [c["text"] for e in peers[1].sent if e["type"] == "conversation.item.create"
             for c in e["item"].get("content", [])]
    assert texts == ["anyone there?", "still there?"]


def test_what_the_user_said_into_a_stalled_network_is_sent_again() -> None:
    """The network stalled while the user spoke: the server never heard it, never said speech_started, and the new
    connection was given half a second of lead-in; the rest of what was said was lost. All that was captured since
    the server last spoke goes again."""
    clock = VirtualClock(start=100.0)
    peers: list[StallingPeer] = []
    connector = _stalling_connector(peers)

    async def main() -> tuple[ConnectionRestored, float]:
        settings = SessionSettings(api_key="k", liveness_timeout_s=3.0, close_timeout_s=2.0)  # the server's VAD
        said = Recording(np.full(24_000 * 20, 900, np.int16), clock=clock, origin=100.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector, input=said)
        async with session:
            await clock.sleep(1.0)
            peers[0].stall()
            stalled_at = clock.now()
            async with asyncio.timeout(60):
                async for event in session:
                    if isinstance(event, ConnectionRestored):
                        return event, clock.now() - stalled_at
        raise AssertionError("the session ended")

    restored, away_s = run_lockstep(main(), clock)
    assert away_s > 3.0 and restored.resent_audio_ms >= away_s * 1000, (restored, away_s)


class _NoAbort:
    """A transport of the app's own that cannot drop its socket: only send, recv, close and ping."""

    def __init__(self, peer: StallingPeer) -> None:
        self.peer, self.media = peer, None

    async def send(self, text: str) -> None:
        await self.peer.send(text)

    async def recv(self) -> str:
        return await self.peer.recv()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.peer.close(code, reason)

    async def ping(self) -> None:
        await self.peer.ping()


def test_a_stalled_transport_that_cannot_abort_is_still_dropped_and_replaced() -> None:
    """Its close never answered and nothing to drop its socket with, the receive waited on it forever: the
    session said the server was silent once, then nothing, neither connected nor reconnecting."""
    clock = VirtualClock(start=100.0)
    peers: list[StallingPeer] = []
    connector = _stalling_connector(peers, _NoAbort)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=3.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        events: list[object] = []
        async with session:
            await clock.sleep(1.0)
            peers[0].stall()
            async with asyncio.timeout(60):
                async for event in session:
                    events.append(event)
                    if isinstance(event, ConnectionRestored):
                        assert session.connected
                        return events
        raise AssertionError("the session ended")

    events = run_lockstep(main(), clock)
    assert [type(e) for e in events if isinstance(e, (SessionError, ConnectionLost, ConnectionRestored))] == [
        SessionError, ConnectionLost, ConnectionRestored] and len(peers) == 2


def test_a_server_that_stalls_every_connection_soon_after_it_opens_spends_the_budget() -> None:
    """Each connection was given up only after the liveness timeout, past reconnect_stable_s, so each counted as one
    that held and refilled the budget: 47 connections in 25 minutes, and no end."""
    clock = VirtualClock(start=100.0)
    peers: list[StallingPeer] = []
    tasks: set[asyncio.Task[None]] = set()

    async def stall_soon(peer: StallingPeer) -> None:
        await clock.sleep(0.5)
        peer.stall()

    connector = greeting_connector(peers, StallingPeer,
                                   then=lambda peer: tasks.add(asyncio.ensure_future(stall_soon(peer))))

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=3)  # liveness 30 s
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        events: list[object] = []
        async with session:
            await session.send_text("hello?")
            async for event in session:
                events.append(event)
                if len(peers) > 8:  # far past the budget: it would go on for ever
                    break
        return events

    events = run_lockstep(main(), clock)
    fatal = [e for e in events if isinstance(e, SessionError) and e.fatal]
    assert fatal and fatal[0].message.startswith("the connection is lost and could not be restored: 3 tries in ")
    assert fatal[0].message.endswith("; reconnect_attempts is 3; 3 connections restored in between dropped within "
                                     "reconnect_stable_s (30 s)") and len(peers) == 4
