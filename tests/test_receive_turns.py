"""Sessions on one loop take turns with the frames of their replies (voxline.base.loop_share).

Eight sessions each find 300 audio deltas already waiting. Without turns a session handles
all of its frames in one step, and one pass of the event loop holds hundreds of frames;
with them the frames spread over many passes, and every frame is still handled. A barge-in
(``input_audio_buffer.speech_started``) does not wait for turns, nor does the reply read ahead of it,
nor does a reply whose listener has less than half a second of it left to play (one just begun).
Deltas are 100 ms long, as the service's and the local server's.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Callable
from typing import Any

import pytest

from voxline.audio.sinks import NullSink
from voxline.base.clock import RealClock
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.transports.base import MemoryTransport, memory_pair
from voxline.session import SessionSettings, VoiceSession, session_loops
from voxline.audio.clocked_output import ClockedOutput

from tests.support.loop_passes import Passes
from tests.support.reply_frames import reply_frames

SESSIONS = 8
DELTAS = 300
DELTA_SAMPLES = 2400  # 100 ms: a session that has five is no longer short of audio


async def _run() -> tuple[list[int], int]:
    received = [0]
    per_pass: list[int] = []
    stop = False
    loop = asyncio.get_running_loop()

    def count_pass(last: int) -> None:  # a callback that schedules itself again runs once per pass
        per_pass.append(received[0] - last)
        if not stop:
            loop.call_soon(count_pass, received[0])

    def on_wire(direction: str, _text: str) -> None:
        if direction == "in":
            received[0] += 1

    sessions = []
    for n in range(SESSIONS):
        client, server = memory_pair(max_queue=1000)
        for text in reply_frames(n, DELTAS, DELTA_SAMPLES):
            await server.send(text)

        async def connect(client=client) -> RealtimeConnection:  # type: ignore[no-untyped-def]
            return RealtimeConnection(client, on_wire=on_wire)

        settings = SessionSettings(api_key="local", liveness_timeout_s=0)
        sessions.append(VoiceSession(settings, output=ClockedOutput(RealClock(), NullSink()), connector=connect))
    loop.call_soon(count_pass, 0)
    async with asyncio.TaskGroup() as group:
        for session in sessions:
            group.create_task(session.__aenter__())
    total = SESSIONS * (DELTAS + 3)
    async with asyncio.timeout(30):  # a guard against a hang, not a timing check
        while received[0] < total:
            await asyncio.sleep(0.001)
    stop = True
    for session in sessions:
        await session.aclose()
    return per_pass, received[0]


def test_no_pass_of_the_loop_handles_more_than_a_few_dozen_frames() -> None:
    per_pass, received = asyncio.run(_run())
    assert received == SESSIONS * (DELTAS + 3)
    assert max(per_pass) <= received // 4  # spread over many passes, not a session's 300 frames at once


SPEECH_STARTED = json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "event_barge",
                             "audio_start_ms": 1000, "item_id": "item_user"})


CROWD = 64  # sessions: more than get a turn in one pass, so a session waits passes for its next
CROWD_DELTAS = 400


async def _barge_in_behind_a_backlog(peek: bool) -> tuple[int, int]:
    """Passes of the loop from a speech_started sent to session 0, behind the rest of its reply, to
    session 0's machine handling it; and the passes the other sessions took for the rest of theirs."""
    passes = Passes()
    handled_at: dict[str, int] = {}
    handled_by_first = [0]
    sent_at = [0]
    sending: list[asyncio.Future[None]] = []

    def observe(n: int, session: VoiceSession) -> None:
        receive = session.machine.receive
        deltas = [0]

        def handled(out: Any, now: float) -> Any:
            if isinstance(out, ev.ResponseOutputAudioDelta):
                deltas[0] += 1
                if deltas[0] == CROWD_DELTAS:
                    handled_at[f"last_{n}"] = passes.n
            if n == 0:
                handled_by_first[0] += 1
                if handled_by_first[0] == CROWD_DELTAS - 60:  # near the end of its reply, a few dozen frames ahead
                    sent_at[0] = passes.n
                    sending.append(asyncio.ensure_future(servers[0].send(SPEECH_STARTED)))
                if isinstance(out, ev.InputAudioBufferSpeechStarted):
                    handled_at["barge"] = passes.n
            return receive(out, now)

        session.machine.receive = handled  # type: ignore[method-assign]

    servers: list[MemoryTransport] = []
    await _crowd(lambda n: reply_frames(n, CROWD_DELTAS, DELTA_SAMPLES), observe, servers,
                 lambda: len(handled_at) >= CROWD + 1, peek=peek)
    passes.stop()
    await asyncio.gather(*sending)
    return handled_at["barge"] - sent_at[0], max(handled_at[f"last_{n}"] for n in range(1, CROWD)) - sent_at[0]


async def _crowd(frames_of: Callable[[int], list[str]], observe: Callable[[int, VoiceSession], None],
                 servers: list[MemoryTransport], done: Callable[[], bool], *, peek: bool = True) -> None:
    """CROWD sessions on this loop, session ``n``'s server having sent ``frames_of(n)`` (their servers into
    ``servers``), each observed; open until ``done()``, then closed. Without ``peek`` the look at frames read
    ahead is undone."""
    sessions = []
    for n in range(CROWD):
        client, server = memory_pair(max_queue=1000)
        servers.append(server)
        for text in frames_of(n):
            await server.send(text)

        async def connect(client: MemoryTransport = client) -> RealtimeConnection:
            conn = RealtimeConnection(client)
            if not peek:
                conn._peeks = None  # the lever undone: no look at the frames read, no early end of a wait
            return conn

        settings = SessionSettings(api_key="local", liveness_timeout_s=0)
        session = VoiceSession(settings, output=ClockedOutput(RealClock(), NullSink()), connector=connect)
        observe(n, session)
        sessions.append(session)
    async with asyncio.TaskGroup() as group:
        for session in sessions:
            group.create_task(session.__aenter__())
    async with asyncio.timeout(30):  # a guard against a hang, not a timing check
        while not done():
            await asyncio.sleep(0.001)
    for session in sessions:
        await session.aclose()


def test_a_barge_in_read_behind_a_reply_goes_ahead_of_other_sessions_turns() -> None:
    barge, _ = asyncio.run(_barge_in_behind_a_backlog(peek=True))
    waited, others = asyncio.run(_barge_in_behind_a_backlog(peek=False))
    # read while its session waits for a turn, the barge-in ends the wait (else about a round of the 64
    # sessions' turns, 8 passes), and the frames ahead of it need no turns (else several rounds); without
    # the lever it still comes no later than the other sessions' backlog (within a pass of it, on a busy host)
    assert barge <= 3, barge
    assert waited > 2 * 3 and waited <= others, (waited, others)  # at least twice the lever's bound (10 on a busy host)


async def _a_reply_begun_behind_a_crowd(short_s: float) -> tuple[int, int]:
    """Session 0's reply has begun to play (its first delta, 100 ms); its next two are sent while 63 sessions
    work through the backlogs of theirs: passes of the loop from then to session 0's machine handling the last;
    and the passes the others took for the rest of theirs. ``short_s``: how little audio a listener must have
    left for its reply's audio to go without turns."""
    passes = Passes()
    handled_at: dict[str, int] = {}
    sent_at = [0]
    sending: list[asyncio.Future[None]] = []
    transcript = json.dumps({"type": "response.output_audio_transcript.delta", "event_id": "event_t",
                             "response_id": "resp_0", "item_id": "item_0", "output_index": 0, "content_index": 0,
                             "delta": "w "})
    begun = reply_frames(0, 3, DELTA_SAMPLES)
    begun[4:] = [frame for delta in begun[4:] for frame in (transcript, delta)]  # as the service interleaves them

    def observe(n: int, session: VoiceSession) -> None:
        receive = session.machine.receive
        deltas = [0]

        def handled(out: Any, now: float) -> Any:
            if isinstance(out, ev.ResponseOutputAudioDelta):
                deltas[0] += 1
                if n == 0 and deltas[0] == 3:
                    handled_at["begun"] = passes.n
                if n > 0 and deltas[0] == CROWD_DELTAS:
                    handled_at[f"last_{n}"] = passes.n
                if n == 1 and deltas[0] == 40:  # the crowd is well into its backlogs, waiting for turns
                    sent_at[0] = passes.n
                    sending.extend(asyncio.ensure_future(servers[0].send(text)) for text in begun[4:])
            return receive(out, now)

        session.machine.receive = handled  # type: ignore[method-assign]

    servers: list[MemoryTransport] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session_loops, "SHORT_OF_AUDIO_S", short_s)
        await _crowd(lambda n: begun[:4] if n == 0 else reply_frames(n, CROWD_DELTAS, DELTA_SAMPLES), observe, servers,
                     lambda: len(handled_at) >= CROWD)
    passes.stop()
    await asyncio.gather(*sending)
    return handled_at["begun"] - sent_at[0], max(handled_at[f"last_{n}"] for n in range(1, CROWD)) - sent_at[0]


def test_a_reply_just_begun_goes_ahead_of_other_sessions_backlogs() -> None:
    """Its listener has at most 100 ms left to play: the rest must come before that runs out, while the other
    sessions' listeners have seconds of theirs queued and can wait."""
    begun, _ = asyncio.run(_a_reply_begun_behind_a_crowd(session_loops.SHORT_OF_AUDIO_S))
    waited, others = asyncio.run(_a_reply_begun_behind_a_crowd(0.0))  # the lever undone: every reply takes turns
    assert begun <= 3, begun
    assert waited > 2 * 3 and waited <= others, (waited, others)


async def _most_frames_in_one_pass(ahead: int) -> int:
    """One session finds ``ahead`` small events and then a speech_started waiting: the most events
    its machine handled in one pass of the loop."""
    passes, per_pass = Passes(), collections.Counter[int]()

    client, server = memory_pair(max_queue=ahead + 10)
    for text in reply_frames(0, 0, 48):
        await server.send(text)
    delta = json.dumps({"type": "response.output_audio_transcript.delta", "event_id": "event_t", "response_id": "resp_0",
                        "item_id": "item_0", "output_index": 0, "content_index": 0, "delta": "w "})
    for _ in range(ahead):
        await server.send(delta)
    await server.send(SPEECH_STARTED)

    async def connect() -> RealtimeConnection:
        return RealtimeConnection(client)

    session = VoiceSession(SessionSettings(api_key="local", liveness_timeout_s=0),
                           output=ClockedOutput(RealClock(), NullSink()), connector=connect)
    receive = session.machine.receive
    done = asyncio.Event()

    def handled(out: Any, now: float) -> Any:
        per_pass[passes.n] += 1
        if isinstance(out, ev.InputAudioBufferSpeechStarted):
            done.set()
        return receive(out, now)

    session.machine.receive = handled  # type: ignore[method-assign]
    await session.__aenter__()
    async with asyncio.timeout(30):  # a guard against a hang, not a timing check
        await done.wait()
    passes.stop()
    await session.aclose()
    return max(per_pass.values())


def test_a_server_that_floods_events_ahead_of_a_barge_in_still_shares_the_loop() -> None:
    # the look goes a few dozen frames ahead, and what it finds goes without turns once per turn:
    # thousands of events read ahead of a barge-in are not handled in one pass of the loop
    assert asyncio.run(_most_frames_in_one_pass(5000)) < 300
