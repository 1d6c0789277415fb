"""What a GPT-Live session recovers after a drop, against the local server's Live endpoints.

Nothing resumes on Live: a stored session is forked (``/v1/live/sessions/{id}/fork``, its
conversation goes on); without ``store`` a new session starts. Either way the session says so
with a typed :class:`~voxline.session.events.LiveContinuity` naming what was lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server import serve
from voxline.realtime.errors import ConfigurationError
from voxline.session import SessionSettings, VoiceSession
from voxline.session.events import ConnectionRestored, LiveContinuity, LiveSessionEnded, SessionError, StateChanged
from voxline.session.live.connect import open_live
from voxline.session.live.machine import LiveMachine
from tests.support.half_open import half_open_relay
from tests.support.live_oracle import check_live_client_event, check_live_server_event
from tests.support.local_server import KEY, config
from tests.support.session_events import until


def _recording_connector(holder: list[VoiceSession], conns: list[RealtimeConnection],
                         frames: list[tuple[int, str, dict[str, Any]]]) -> Callable[[], Awaitable[RealtimeConnection]]:
    """Opens the session's Live connections, keeping each and its frames (audio aside) by connection number."""
    async def connector() -> RealtimeConnection:
        n = len(conns)

        def wire(direction: str, text: str) -> None:
            event = json.loads(text)
            if event.get("type") not in ("session.input_audio.append", "session.output_audio.delta"):
                frames.append((n, direction, event))

        machine = holder[0].machine
        assert isinstance(machine, LiveMachine)
        conn = await open_live(holder[0].settings, machine, on_wire=wire)
        conns.append(conn)
        return conn

    return connector


@pytest.mark.parametrize("store", [True, False])
async def test_a_drop_forks_a_stored_session_or_starts_a_new_one_and_says_what_was_lost(store: bool) -> None:
    frames: list[tuple[int, str, dict[str, Any]]] = []
    conns: list[RealtimeConnection] = []
    async with serve(config(scenario="default")) as server:
        settings = SessionSettings(api="live", url=server.url, api_key=KEY, live_store=store,
                                   reconnect_attempts=8, instructions="Be brief.")
        holder: list[VoiceSession] = []
        connector = _recording_connector(holder, conns, frames)

        clock = RealClock()
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                               backoff=lambda attempt: 0.05)
        holder.append(session)
        async with session:
            await until(session, lambda e: isinstance(e, StateChanged) and e.state == "listening")
            first_id = session.live.session_id
            assert first_id
            await conns[0].transport.close(4000, "dropped")  # not a hang-up: the server sees a lost connection
            seen = await until(session, lambda e: isinstance(e, LiveContinuity), timeout_s=20)
        restored = [e for e in seen if isinstance(e, ConnectionRestored)]
        continuity = next(e for e in seen if isinstance(e, LiveContinuity))
    assert restored and continuity.from_session == first_id
    last = len(conns) - 1
    start = next(e for n, d, e in frames if n == last and d == "out")
    if store:
        assert continuity.how == "fork" and "delegations in flight" in continuity.lost
        assert isinstance(start.pop("event_id"), str)  # a refusal maps back to it
        assert start == {"type": "session.start", "session": {"audio": {"format": {"type": "audio/pcm", "rate": 24000}}}}
        check_live_client_event(start, "fork")
    else:
        assert continuity.how == "new" and any("conversation" in what for what in continuity.lost)
        assert start["session"]["model"] == "gpt-live-1"
        check_live_client_event(start)
    for n, direction, event in frames:
        (check_live_client_event(event, "fork" if store and n > 0 else "primary") if direction == "out"
         else check_live_server_event(event))


async def test_a_stored_session_whose_fork_is_refused_goes_on_as_a_new_session() -> None:
    """A drop the server has not noticed (the client's side reset, the server's left open): the stored session
    still runs there, and its fork is refused (HTTP 400, not forkable). Before, every reconnect try forked it
    again and the session ended for good with the budget; now the next connection starts a new session with what
    was heard, and says so."""
    frames: list[tuple[int, str, dict[str, Any]]] = []
    conns: list[RealtimeConnection] = []
    async with serve(config(scenario="default")) as server, \
            half_open_relay(int(server.url.split(":")[2].split("/")[0])) as (relay, port):
        settings = SessionSettings(api="live", url=f"ws://127.0.0.1:{port}/v1", api_key=KEY, live_store=True,
                                   reconnect_attempts=3, instructions="Be brief.")
        holder: list[VoiceSession] = []
        clock = RealClock()
        session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock,
                               connector=_recording_connector(holder, conns, frames), backoff=lambda attempt: 0.05)
        holder.append(session)
        async with session:
            await until(session, lambda e: isinstance(e, StateChanged) and e.state == "listening")
            first_id = session.live.session_id
            relay.cut()
            seen = await until(session, lambda e: isinstance(e, LiveContinuity), timeout_s=20)
            assert session.connected and session.live.session_id not in (None, first_id)
    continuity = next(e for e in seen if isinstance(e, LiveContinuity))
    assert continuity.how == "new" and continuity.from_session == first_id
    assert continuity.refused is not None and "HTTP 400" in continuity.refused, continuity
    assert "it is still running" in continuity.refused  # the server's reason, from its JSON body
    assert any("conversation" in what for what in continuity.lost)
    assert not [e for e in seen if isinstance(e, SessionError)]  # the refused fork is no failed try
    start = next(e for n, d, e in frames if n == len(conns) - 1 and d == "out")
    assert start["session"]["model"] == "gpt-live-1" and start["session"]["instructions"] == "Be brief."
    check_live_client_event(start)


@pytest.mark.slow  # real time: a reply heard, then a drop
@pytest.mark.parametrize("transport", ["ws", "webrtc"])
async def test_a_new_session_after_a_drop_is_given_what_was_said_and_heard(transport: str) -> None:
    """Without ``store`` a drop starts a new session seeded with the conversation's text. Over WebRTC the offer's
    POST starts the session, and it carried the configuration alone: the model forgot everything said."""
    from voxline.audio.recording import Recording
    from voxline.session.events import HeardTranscript

    frames: list[tuple[int, str, dict[str, Any]]] = []
    conns: list[RealtimeConnection] = []
    async with serve(config(scenario="default", transcripts=("Hello.",))) as server:
        clock = RealClock()
        t = np.arange(24_000) / 24_000
        speech = np.concatenate([np.zeros(12_000, np.int16), (6000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16),
                                 np.zeros(24_000 * 30, np.int16)])
        settings = SessionSettings(api="live", url=server.url, api_key=KEY, transport=transport, reconnect_attempts=3)
        holder: list[VoiceSession] = []
        session = VoiceSession(settings, output=ClockedOutput(clock), input=Recording(speech, clock, clock.now()),
                               clock=clock, connector=_recording_connector(holder, conns, frames),
                               backoff=lambda attempt: 0.05)
        holder.append(session)
        async with session:
            await until(session, lambda e: isinstance(e, HeardTranscript), timeout_s=30)
            await conns[0].transport.close(4000, "dropped")
            await until(session, lambda e: isinstance(e, LiveContinuity), timeout_s=20)
    started = [e for n, d, e in frames if n == len(conns) - 1 and e["type"] == "session.started"]
    given = [(m["role"], m["content"][0]["text"]) for m in started[-1]["session"]["input"]]
    assert ("user", "Hello.") in given
    assert any(role == "assistant" and text.startswith("Hello! This is the voxline local server.")
               for role, text in given), given


def test_a_refused_fork_is_said_in_the_sessions_line() -> None:
    from voxline.session.report.lines import EventLines

    line = EventLines().line(LiveContinuity("new", "sess_1", ("audio-level context",), 2.0,
                                            refused="HTTP 400 from ws://h/v1/live/sessions/sess_1/fork: " + "x" * 900))
    assert line is not None and line.startswith("continuity: started a new session from what was heard (the stored "
                                                "session's fork was refused: HTTP 400 from ws://h/")
    assert len(line) < 330 and line.endswith("…); lost: audio-level context")  # the reason cut to 200


async def test_a_session_closed_at_the_apps_request_is_over_not_reconnected() -> None:
    async with serve(config(scenario="default")) as server:
        settings = SessionSettings(api="live", url=server.url, api_key=KEY, reconnect_attempts=3)
        clock = RealClock()
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock) as session:
            await until(session, lambda e: isinstance(e, StateChanged) and e.state == "listening")
            await session.live.close_session()
            seen = await until(session, lambda e: isinstance(e, LiveSessionEnded), timeout_s=15)
            rest = []
            async with asyncio.timeout(10):
                async for event in session:  # the iterator ends: no reconnect, no new session
                    rest.append(event)
            # over: the app's commands say so (before, they were taken and nothing went), and so does the session
            for command in (lambda: session.live.append("more"), session.live.mute, session.live.close_session,
                            session.start_talking):
                with pytest.raises(ConfigurationError, match=r"^the GPT-Live session is over \(closed: close_requested\)"):
                    await command()
            assert not session.connected and repr(session) == f"<VoiceSession {settings.live_model} ended>"
    ended = next(e for e in seen if isinstance(e, LiveSessionEnded))
    assert ended.reason == "close_requested"
    assert not any(isinstance(e, (ConnectionRestored, LiveContinuity)) for e in rest)


async def test_a_sideband_attaches_to_a_running_session_and_sees_its_events() -> None:
    from voxline.audio.recording import Recording
    from voxline.session.events import TranscriptDelta

    frames: list[dict[str, Any]] = []
    async with serve(config(scenario="default", transcripts=("Hello.",))) as server:
        clock = RealClock()
        t = np.arange(24_000) / 24_000
        speech = np.concatenate([np.zeros(12_000, np.int16), (6000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16),
                                 np.zeros(24_000 * 8, np.int16)])
        primary = VoiceSession(SessionSettings(api="live", url=server.url, api_key=KEY), output=ClockedOutput(clock),
                               input=Recording(speech, clock, clock.now()), clock=clock)
        async with primary:
            await until(primary, lambda e: isinstance(e, StateChanged) and e.state == "listening")
            session_id = primary.live.session_id
            side = SessionSettings(api="live", url=server.url, api_key=KEY, call_id=session_id)
            sideband = VoiceSession(side, output=ClockedOutput(clock), clock=clock, run_tools=False,
                                    on_wire=lambda d, text: frames.append(json.loads(text)))
            async with sideband:
                seen = await until(sideband, lambda e: isinstance(e, TranscriptDelta) and e.role == "assistant",
                                   timeout_s=20)
                assert sideband.live.session_id == session_id
    assert not any(f["type"] == "session.start" for f in frames)  # a sideband attaches; it starts nothing
    assert any(isinstance(e, TranscriptDelta) and e.role == "user" for e in seen)
    assert any(f["type"] == "session.output_audio.delta" and "start_ms" in f for f in frames)  # reflected, timed
    for f in frames:
        if f["type"] != "session.input_audio.append":
            check_live_server_event(f, "sideband")


@pytest.mark.slow  # real time, several seconds
async def test_a_tool_running_when_the_connection_drops_runs_once_and_the_next_session_hears_its_result() -> None:
    """The local Live server's Responses backend asks for a tool; the connection drops while it runs. The next
    session never made that call (it would refuse its output): it is told the result as silent context."""
    from voxline.session.replay.driver import run_replay
    from voxline.session.tools import ToolRegistry

    frames: list[tuple[int, str, dict[str, Any]]] = []
    conns: list[RealtimeConnection] = []
    holder: list[VoiceSession] = []
    runs: list[str] = []
    registry = ToolRegistry()

    @registry.tool(read_only=True)
    async def get_weather(city: str, unit: str = "celsius") -> str:
        """Current weather for a city."""
        runs.append(city)
        await conns[0].transport.close(4000, "dropped")  # the connection is lost while the tool runs
        async with asyncio.timeout(15):
            while len(conns) < 2:
                await asyncio.sleep(0.01)
        return f"clear and 21 degrees in {city}"

    connector = _recording_connector(holder, conns, frames)
    t = np.arange(24_000) / 24_000
    speech = np.concatenate([np.zeros(12_000, np.int16), (6000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16),
                             np.zeros(24_000 * 6, np.int16)])
    async with serve(config(scenario="tools", transcripts=("What is the weather in Paris?",), speed=4.0)) as server:
        settings = SessionSettings(api="live", url=server.url, api_key=KEY, reconnect_attempts=8,
                                   turn_detection="none")
        result = await run_replay(speech, connector=connector, clock=RealClock(), settings=settings, tools=registry,
                                  tail_s=3.0, on_session=holder.append)
    assert runs == ["Paris"]  # once
    assert len(conns) == 2 and any(isinstance(e, LiveContinuity) for e in result.events)
    second_out = [e for n, d, e in frames if n == 1 and d == "out"]
    notes = [e for e in second_out if e["type"] == "session.thinking.append"]
    assert len(notes) == 1 and "clear and 21 degrees in Paris" in notes[0]["content"], second_out
    assert not any(e["type"] in ("response.item.create", "response.create") for e in second_out)
    assert not any(e["type"] == "error" for n, d, e in frames if n == 1 and d == "in")  # nothing refused
    for n, direction, event in frames:
        (check_live_client_event(event) if direction == "out" else check_live_server_event(event))


@pytest.mark.parametrize("reason", ["expired", "close_requested"])
async def test_a_session_closed_on_a_socket_left_open_is_hung_up_on_not_streamed_to(reason: str) -> None:
    """``session.closed`` ends the server's session; a server that leaves its socket open after it must not keep the
    client streaming into a session that is over. The client lets go of the connection itself: a session ended on
    purpose is over, one that expired goes on in a new session."""
    from websockets.asyncio.server import ServerConnection
    from websockets.asyncio.server import serve as ws_serve

    from tests.support.live_rig import SESSION, frame

    wires: list[list[str]] = []  # what each connection was sent, with where the server said session.closed

    async def handler(connection: ServerConnection) -> None:
        n, types = len(wires), []
        wires.append(types)
        async for text in connection:
            kind = json.loads(text)["type"]
            types.append(kind)
            if kind == "session.start":
                await connection.send(frame(type="session.started", event_id=f"s{n}", session={**SESSION, "id": f"sess_{n}"}))
            elif kind == "session.input_audio.append" and n == 0 and "<closed>" not in types:
                types.append("<closed>")
                await connection.send(frame(type="session.closed", event_id="c", reason=reason,
                                            session={**SESSION, "id": "sess_0", "status": "closed"},
                                            usage={"seconds": 1.0}))
        types.append("<client closed>")  # the loop ends when the client closes: the server never does

    async def silence() -> Any:
        while True:
            await asyncio.sleep(0.02)
            yield np.zeros(480, np.int16)

    async with ws_serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        settings = SessionSettings(api="live", url=f"ws://127.0.0.1:{port}/v1", api_key=KEY, reconnect_attempts=3)
        clock = RealClock()
        session = VoiceSession(settings, output=ClockedOutput(clock), input=silence(), clock=clock,
                               backoff=lambda attempt: 0.05)
        async with session:
            seen = await until(session, lambda e: isinstance(e, LiveSessionEnded), timeout_s=15)
            if reason == "expired":
                seen = await until(session, lambda e: isinstance(e, LiveContinuity), seen, timeout_s=15)
                assert session.connected and session.live.session_id == "sess_1"
            else:
                async with asyncio.timeout(10):
                    seen.extend([event async for event in session])  # over: the iterator ends
                assert not session.connected
    first = wires[0]
    assert first[-1] == "<client closed>", first[-12:]
    after = first[first.index("<closed>") + 1:-1]
    assert after.count("session.input_audio.append") <= 3, after  # those already on their way, no more
    assert [w[0] for w in wires[1:]] == (["session.start"] if reason == "expired" else [])
    ended = next(e for e in seen if isinstance(e, LiveSessionEnded))
    assert ended.reason == reason and ended.session_id == "sess_0"
