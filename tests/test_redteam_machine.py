"""Red-team cases for the session's split into a machine, its driver, the link and the input feed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from voxline.base.clock import VirtualClock
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed
from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording
from voxline.session.events import ConnectionLost, SessionError
from voxline.session.lockstep import run_lockstep
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.peers import AnsweringPeer, greeting_connector


def test_a_question_after_a_long_quiet_spell_is_not_taken_for_a_silent_server() -> None:
    """The server's silence is counted from when it came to owe an answer, not from its last event:
    a user who speaks after a minute's quiet gives a live server its round trip to answer."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    connector = greeting_connector(peers, AnsweringPeer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", liveness_timeout_s=30.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(60.0)  # nothing owed: the server says nothing, its socket answers pings
            await session.send_text("still there?")
            await clock.sleep(0.5)  # a slow network's round trip; the server then starts its answer
            created = ev.server_event_sample("response.created")
            await peers[0].server.send(json.dumps(created))
            await clock.sleep(1.0)
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert len(peers) == 1, events
    assert not [e for e in events if isinstance(e, (ConnectionLost, SessionError))], events


def _expiring_peer(clock: VirtualClock, life_s: float) -> AnsweringPeer:
    peer = AnsweringPeer()
    peer.server_time = clock.wall()  # type: ignore[attr-defined]  # the handshake's Date: the server's clock
    return peer


async def _created(peer: AnsweringPeer, clock: VirtualClock, life_s: float) -> None:
    created = ev.server_event_sample("session.created")
    created["session"]["expires_at"] = int(clock.wall() + life_s)
    await peer.server.send(json.dumps(created))


@pytest.mark.parametrize("failure", [ValueError("the app's connector broke"), SystemExit("the connector gave up")],
                         ids=["ValueError", "SystemExit"])
def test_an_apps_connector_that_raises_while_a_hand_over_warms_up_costs_the_hand_over_not_the_session(
        failure: BaseException) -> None:
    """A SystemExit ended the warming task, and a task that ends so stops the event loop: the whole process."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    calls = 0

    async def connector() -> RealtimeConnection:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise failure
        peer = _expiring_peer(clock, 100.0)
        peers.append(peer)
        await _created(peer, clock, 100.0)
        return RealtimeConnection(peer)

    async def main() -> tuple[list[object], bool]:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(85.0)  # the hand-over window opens at 80 s
            return session.pending_events(), session.connected

    events, connected = run_lockstep(main(), clock)
    assert connected and calls >= 2, events
    assert [e for e in events if isinstance(e, SessionError) and e.code == "handover_failed"], events


def test_a_successor_warmed_up_for_a_hand_over_is_closed_with_the_session() -> None:
    """Within close_timeout_s, though neither server finishes its close handshake."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    closed: list[int] = []
    took: list[float] = []

    async def connector() -> RealtimeConnection:
        peer = _expiring_peer(clock, 100.0)
        number = len(peers)
        original = peer.close

        async def close(code: int = 1000, reason: str = "") -> None:
            closed.append(number)
            await clock.sleep(60.0)
            await original(code, reason)

        peer.close = close  # type: ignore[method-assign]
        peers.append(peer)
        await _created(peer, clock, 100.0)
        return RealtimeConnection(peer)

    async def main() -> None:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await session.send_text("a long story, please")
            await clock.sleep(0.1)
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.created")))
            for _ in range(20):  # a response that goes on past the hand-over window: no turn boundary
                await clock.sleep(5.0)
                await peers[0].server.send(json.dumps(ev.server_event_sample("rate_limits.updated")))
            assert len(peers) == 2  # the successor is ready, waiting for a boundary
            start = clock.now()
            await session.aclose()
            took.append(clock.now() - start)

    run_lockstep(main(), clock)
    assert sorted(closed) == [0, 1], closed
    assert took[0] <= SessionSettings().close_timeout_s + 0.1, took


def test_a_successor_warmed_up_for_a_connection_that_dropped_is_closed_not_kept() -> None:
    """And the drop is reported (and what was audible cut) before the successor's close, however long it takes."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    closed: list[int] = []
    dropped_at: list[float] = []

    async def connector() -> RealtimeConnection:
        peer = _expiring_peer(clock, 100.0)
        number = len(peers)
        original = peer.close

        async def close(code: int = 1000, reason: str = "") -> None:
            closed.append(number)
            if number == 1:
                await clock.sleep(60.0)  # a server that never finishes the close handshake
            await original(code, reason)

        peer.close = close  # type: ignore[method-assign]
        peers.append(peer)
        await _created(peer, clock, 100.0)
        return RealtimeConnection(peer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await session.send_text("a long story, please")
            await clock.sleep(0.1)
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.created")))
            for _ in range(17):  # the response goes on into the hand-over window: no turn boundary
                await clock.sleep(5.0)
                await peers[0].server.send(json.dumps(ev.server_event_sample("rate_limits.updated")))
            assert len(peers) == 2  # the successor is ready, waiting for a boundary
            dropped_at.append(session.output.now())
            await peers[0].server.close(1011, "gone")  # and the connection drops first
            await clock.sleep(5.0)
            assert session.connected and len(peers) == 3
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert 1 in closed, (closed, events)  # the successor of the lost connection was let go
    lost = [e for e in events if isinstance(e, ConnectionLost)]
    assert len(lost) == 1 and lost[0].at - dropped_at[0] < 0.1, (lost, dropped_at)


def test_a_successor_the_server_closed_while_it_waited_is_not_handed_over_to() -> None:
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []

    async def connector() -> RealtimeConnection:
        peer = _expiring_peer(clock, 100.0)
        peers.append(peer)
        await _created(peer, clock, 100.0)
        return RealtimeConnection(peer)

    async def main() -> tuple[list[object], bool]:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0)
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await session.send_text("a long story, please")
            await clock.sleep(0.1)
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.created")))
            for _ in range(17):  # the response goes on into the hand-over window: no turn boundary
                await clock.sleep(5.0)
                await peers[0].server.send(json.dumps(ev.server_event_sample("rate_limits.updated")))
            assert len(peers) == 2  # the successor is ready, waiting for a boundary
            await peers[1].server.close(1011, "gone")  # its server hangs up on it
            await clock.sleep(1.0)
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.done")))
            await clock.sleep(10.0)
            return session.pending_events(), session.connected

    events, connected = run_lockstep(main(), clock)  # (the session's loop used to spin here for ever)
    assert connected and len(peers) == 3, events  # the closed successor was a drop: a third connection took over


class _Dying(AnsweringPeer):
    """A peer whose connection closes as the restore is sent, right after the configuration."""

    async def send(self, text: str) -> None:
        if self.sent:
            await self.client.close(1011, "gone")
            raise ConnectionClosed(1011, "gone")
        await super().send(text)


@pytest.mark.parametrize("first_retry_dies", [False, True], ids=["restored", "first restore lost"])
def test_a_push_to_talk_turn_released_while_away_is_committed_on_the_next_connection(first_retry_dies: bool) -> None:
    """Released while reconnecting, the turn is resent from the journal: it must be committed
    before its response is asked for, or the reply ignores it and the next press clears it."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []

    connector = greeting_connector(peers, lambda: _Dying() if first_retry_dies and len(peers) == 1 else AnsweringPeer())

    rng = np.random.default_rng(3)
    samples = (rng.standard_normal(24_000 * 4) * 3000).astype(np.int16)

    async def main() -> None:
        settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=3)
        session = VoiceSession(settings, output=ClockedOutput(clock, origin=100.0),
                               input=Recording(samples, clock, 100.0), clock=clock, connector=connector,
                               backoff=lambda attempt: 1.0)
        async with session:
            await clock.sleep(0.5)
            await session.start_talking()
            await clock.sleep(1.0)
            await peers[0].server.close(1011, "gone")  # the connection drops while the user talks
            await clock.sleep(0.3)
            await session.stop_talking()  # and they let go while it is away
            await clock.sleep(3.0)
            assert session.connected and len(peers) == 2 + first_retry_dies

    run_lockstep(main(), clock)
    kinds = [str(f["type"]) for f in peers[-1].sent]
    assert "input_audio_buffer.append" in kinds and "response.create" in kinds, kinds
    assert "input_audio_buffer.commit" in kinds, kinds
    last_append = max(i for i, k in enumerate(kinds) if k == "input_audio_buffer.append")
    assert last_append < kinds.index("input_audio_buffer.commit") < kinds.index("response.create"), kinds


def test_a_sideband_does_not_hand_over_since_a_new_one_would_not_outlive_the_call() -> None:
    """A sideband's expires_at is its call's: each successor would expire with it, and the
    hand-overs came faster and faster towards the end of the call."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []
    expires = clock.wall() + 100.0

    async def connector() -> RealtimeConnection:
        peer = _expiring_peer(clock, 100.0)
        peers.append(peer)
        await _created(peer, clock, expires - clock.wall())
        return RealtimeConnection(peer)

    async def main() -> list[object]:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0, call_id="rtc_test")
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await clock.sleep(99.0)
            assert session.connected
            return session.pending_events()

    events = run_lockstep(main(), clock)
    assert len(peers) == 1, events


def test_instructions_updated_while_a_successor_warms_up_reach_it() -> None:
    """The successor was configured when it was warmed up: a later update must follow it over."""
    clock = VirtualClock(start=100.0)
    peers: list[AnsweringPeer] = []

    async def connector() -> RealtimeConnection:
        peer = _expiring_peer(clock, 100.0)
        peers.append(peer)
        await _created(peer, clock, 100.0)
        return RealtimeConnection(peer)

    async def main() -> None:
        settings = SessionSettings(api_key="k", turn_detection="none", handover_s=20.0, instructions="Be brief.")
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
        async with session:
            await session.send_text("a long story, please")
            await clock.sleep(0.1)
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.created")))
            for _ in range(17):  # the response goes on into the hand-over window: no turn boundary
                await clock.sleep(5.0)
                await peers[0].server.send(json.dumps(ev.server_event_sample("rate_limits.updated")))
            assert len(peers) == 2  # the successor is ready, waiting for a boundary
            await session.update(instructions="Speak French.")
            await peers[0].server.send(json.dumps(ev.server_event_sample("response.done")))
            await clock.sleep(2.0)
            assert session.connected and session._link.conn is not None
            assert session._link.conn.transport is peers[1]  # handed over

    run_lockstep(main(), clock)
    updates = [f["session"] for f in peers[1].sent if f["type"] == "session.update"]
    assert updates and updates[-1].get("instructions") == "Speak French.", updates  # type: ignore[union-attr]
