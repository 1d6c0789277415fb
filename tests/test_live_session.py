"""A GPT-Live session through the one driver (``VoiceSession`` with ``api="live"``), against a scripted peer.

The listener's timeline is a ``ClockedOutput`` on a ``VirtualClock``; the peer streams an utterance
in real time; the user's words arrive mid-reply. The session must silence the output at once and
tell the model, by ``session.instructions.append``, the timeline instant the listener reached.
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.sinks import TimelineSink
from voxline.base.clock import VirtualClock
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.live.connection import live_connection
from voxline.session import SessionSettings, VoiceSession
from voxline.session.events import AssistantAudioStarted, BargeIn, LiveDelivered, SessionError, StateChanged
from tests.support.live_peer import LivePeer
from tests.support.session_events import collect

WORDS = "The museum opens at nine and the guided tour starts from the main hall at ten sharp".split()


async def test_a_live_session_cuts_where_the_listener_is_and_says_so() -> None:
    clock = VirtualClock()
    peer = LivePeer(clock)
    sink = TimelineSink()

    async def connector():  # type: ignore[no-untyped-def]
        return live_connection(peer.transport())

    settings = SessionSettings(api="live", api_key="sk-test", instructions="Be brief.")
    serving = asyncio.ensure_future(peer.serve())
    async with VoiceSession(settings, output=ClockedOutput(clock, sink), clock=clock, connector=connector) as session:
        await collect(session, clock, lambda e: isinstance(e, StateChanged) and e.state == "listening")
        assert [e["type"] for e in peer.sent][:1] == ["session.start"]
        while clock.now() < 1.0:  # a second of the track's silence first: the reply lies 1 s into the timeline
            await asyncio.sleep(0)
            clock.advance(0.02)
        peer.reply(WORDS, 4.0)
        await collect(session, clock, lambda e: isinstance(e, AssistantAudioStarted))
        while clock.now() < 3.3:
            await asyncio.sleep(0)
            clock.advance(0.02)
        user_ms = peer.timeline_ms()
        await peer.emit(type="session.input_transcript.delta", delta="wait", start_ms=user_ms, end_ms=user_ms + 200)
        seen = await collect(session, clock, lambda e: isinstance(e, LiveDelivered))
        barge = next(e for e in seen if isinstance(e, BargeIn))
        for _ in range(150):  # the model streams the rest of its utterance; the client drops it
            await asyncio.sleep(0)
            clock.advance(0.02)
    peer.stop()
    serving.cancel()
    played = sink.samples
    heard = int(np.count_nonzero(played))  # what reached the listener (the tone is never zero)
    told = [e for e in peer.sent if e["type"] == "session.instructions.append"]
    assert len(told) == 1
    at_ms = float(re.search(r"at (\d+) ms on the session timeline", told[0]["content"]).group(1))
    assert peer.reply_starts[0] >= 900  # the reply lies a second into the timeline
    truth_ms = peer.reply_starts[0] + heard * 1000 / 24_000
    assert abs(truth_ms - at_ms) <= 20  # what it told is what was heard, within one 20 ms block
    assert heard * 1000 / 24_000 > 500 and barge.heard_ms < 3500  # a cut mid-reply, not at an end
    assert not played[int(barge.at * 24_000) + 200:].any()  # silence at once, though the model streamed on
    heard_words = [w for i, w in enumerate(WORDS) if peer.reply_starts[0] + (i + 1) * 4000 / len(WORDS) <= truth_ms]
    said = next(e for e in seen if isinstance(e, LiveDelivered)).heard_text.split()
    assert said[:len(heard_words)] == heard_words and len(said) - len(heard_words) <= 1


async def test_a_session_whose_start_was_refused_says_it_failed_to_every_command() -> None:
    """Before, the fatal error reached the app but the session did not count itself failed: its Live
    commands went on to a server with no session, each refused again in an error of its own."""
    clock = VirtualClock()
    peer = LivePeer(clock, refuse_start="the model gpt-4o is not a Live model")

    async def connector():  # type: ignore[no-untyped-def]
        return live_connection(peer.transport())

    settings = SessionSettings(api="live", api_key="sk-test")
    serving = asyncio.ensure_future(peer.serve())
    async with VoiceSession(settings, output=ClockedOutput(clock, TimelineSink()), clock=clock,
                            connector=connector) as session:
        await collect(session, clock, lambda e: isinstance(e, SessionError) and e.fatal)
        with pytest.raises(ConfigurationError, match=r"^the session failed \(the session could not start: the model "
                                                     r"gpt-4o is not a Live model\)"):
            session.live.append("the user's name is Ada")
    peer.stop()
    serving.cancel()
    assert not [e for e in peer.sent if e["type"] == "session.instructions.append"]


async def _until_the_end(session: VoiceSession, clock: VirtualClock, limit_s: float) -> tuple[list[object], bool]:
    """The session's events as virtual time runs, until they end (True) or ``limit_s`` of it passed (False)."""
    seen: list[object] = []
    iterator = session.__aiter__()
    while clock.now() < limit_s:
        try:
            seen.append(await asyncio.wait_for(iterator.__anext__(), timeout=0.005))
        except asyncio.TimeoutError:
            clock.advance(0.1)
        except StopAsyncIteration:
            return seen, True
    return seen, False


@pytest.mark.parametrize("server", ["hangs up", "stays"])
async def test_a_session_whose_start_was_refused_ends_there_and_is_not_started_again(server: str) -> None:
    """A refused start is fatal: the session ends with it. Before, it went on to a second connection (the drop
    of one that hung up, or a liveness give-up on one left open) whose session started and played, while every
    command of the app was refused as the session's failure and ``connected`` stayed False."""
    clock = VirtualClock()
    peers: list[LivePeer] = []
    serving: list[asyncio.Future[None]] = []

    async def connector():  # type: ignore[no-untyped-def]
        peer = LivePeer(clock, session_id=f"sess_live{len(peers) + 1}",
                        refuse_start=None if peers else "too many sessions at once")
        peers.append(peer)
        serving.append(asyncio.ensure_future(peer.serve()))
        return live_connection(peer.transport())

    settings = SessionSettings(api="live", api_key="sk-test", liveness_timeout_s=2.0)
    async with VoiceSession(settings, output=ClockedOutput(clock, TimelineSink()), clock=clock,
                            connector=connector) as session:
        seen = await collect(session, clock, lambda e: isinstance(e, SessionError) and e.fatal)
        if server == "hangs up":
            await peers[0].server.close(1011, "no session")
        rest, ended = await _until_the_end(session, clock, limit_s=clock.now() + 10.0)
        assert ended, [type(e).__name__ for e in rest]
        assert len(peers) == 1 and not session.connected and "failed" in repr(session)
        assert not [e for e in rest if isinstance(e, (StateChanged, SessionError))], rest  # nor a "reconnecting"
        with pytest.raises(ConfigurationError, match=r"^the session failed \(the session could not start"):
            session.live.mute()
    for peer in peers:
        peer.stop()
    for task in serving:
        task.cancel()
    assert [e for e in seen if isinstance(e, SessionError)][-1].code == "invalid_value"
