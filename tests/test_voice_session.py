"""VoiceSession against the built-in server: text turns, tools, interrupt, reconnect.

The listener's timeline is a ClockedOutput on a VirtualClock: the test moves time, so
playback and barge-in positions are exact and nothing waits on the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from voxline.base.clock import VirtualClock
from voxline.realtime.connection import connect
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.net.config import FaultConfig
from voxline.session.events import (
    AssistantAudioStarted,
    BargeIn,
    ConnectionLost,
    ConnectionRestored,
    ResponseFinished,
    StateChanged,
    TranscriptDone,
)
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry, ToolStarted
from voxline.session.voice import VoiceSession, exponential_backoff
from tests.support.oracle import WireRecorder, sent
from tests.support.session_events import collect


@asynccontextmanager
async def voice_session(rec: WireRecorder, *, tools: ToolRegistry | None = None, approve: Any = None,
                        **server: Any) -> AsyncIterator[tuple[VoiceSession, VirtualClock]]:
    clock = VirtualClock()
    config = {"port": 0, "voice": "tone", "speed": float("inf"), **server}
    async with serve(ServerConfig(**config)) as srv:
        async def connector() -> Any:
            return await connect(srv.url, "sk-test", on_wire=rec)

        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none", reconnect_attempts=3)
        session = VoiceSession(settings, output=ClockedOutput(clock), tools=tools, approve=approve, clock=clock,
                               connector=connector)
        async with session:
            yield session, clock
    rec.verify()


async def test_text_turn_is_heard_and_transcribed() -> None:
    rec = WireRecorder()
    async with voice_session(rec) as (session, clock):
        await session.send_text("hello")
        seen = await collect(session, clock, lambda e: isinstance(e, AssistantAudioStarted))
        heard = seen[-1]
        assert heard.at == pytest.approx(0.0, abs=0.05)  # the first block after the reply arrived
        if not any(isinstance(e, ResponseFinished) for e in seen):  # the audio may be heard before the reply is over
            seen += await collect(session, clock, lambda e: isinstance(e, ResponseFinished))
        assert any(isinstance(e, TranscriptDone) and e.role == "assistant" and "voxline" in e.text for e in seen)
        assert next(e for e in seen if isinstance(e, ResponseFinished)).status == "completed"
    assert len(sent(rec, "response.create")) == 1


def weather_tools(log: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Current weather for a city."""
        log.append(f"weather:{city}")
        return {"city": city, "temperature": 21, "unit": unit}

    @tools.tool(read_only=True)
    def get_time(zone: str) -> str:
        """The time in a zone."""
        log.append(f"time:{zone}")
        return "12:00"

    return tools


async def test_a_call_to_a_registered_tool_the_session_does_not_offer_is_refused_not_run() -> None:
    """A registry shared across sessions holds tools one session does not offer (``update(tools=...)``); a call to
    one of them (a model's mistake, an injected instruction) ran it all the same."""
    rec, log = WireRecorder(), []
    async with voice_session(rec, tools=weather_tools(log), scenario="tools") as (session, clock):
        await session.update(tools=["get_time"])
        await session.send_text("weather please")
        await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "weather report" in e.text)
    assert log == []
    [output] = [o["item"]["output"] for o in sent(rec, "conversation.item.create")
                if o["item"]["type"] == "function_call_output"]
    assert json.loads(output) == {"error": "tool 'get_weather' is not offered in this session"}


async def test_parallel_tool_calls_get_one_response_create_after_all_outputs() -> None:
    rec, log = WireRecorder(), []
    async with voice_session(rec, tools=weather_tools(log), scenario="tools") as (session, clock):
        await session.send_text("weather please")
        # turn 1: a preamble and one call, then the scripted follow-up
        first = await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "weather report" in e.text)
        # turn 2: two calls in one response
        await session.send_text("and the time?")
        second = await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "Both answers" in e.text)
    assert sorted(log) == ["time:UTC", "weather:Oslo", "weather:Paris"]
    outputs = sent(rec, "conversation.item.create")
    call_outputs = [o["item"]["call_id"] for o in outputs if o["item"]["type"] == "function_call_output"]
    assert len(call_outputs) == len(set(call_outputs)) == 3
    creates = [json.loads(t) for d, t in rec.frames if d == "out"]
    # after the two parallel outputs exactly one response.create follows, never one in between
    kinds = [e["type"] for e in creates if e["type"] in ("conversation.item.create", "response.create")]
    assert kinds[-3:] == ["conversation.item.create", "conversation.item.create", "response.create"]
    started = [e.name for e in first + second if isinstance(e, ToolStarted)]
    finished = [e for e in first + second if isinstance(e, ToolFinished)]
    assert sorted(started) == ["get_time", "get_weather", "get_weather"] and all(f.ok for f in finished)


async def test_denied_approval_goes_back_to_the_model_and_the_tool_never_runs() -> None:
    rec, ran = WireRecorder(), []
    tools = ToolRegistry()

    @tools.tool(needs_approval=True)
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Side effect for the test."""
        ran.append(city)
        return "ok"

    async def deny(_call: Any) -> bool:
        return False

    async with voice_session(rec, tools=tools, approve=deny, scenario="tools") as (session, clock):
        await session.send_text("weather please")
        (finished,) = [e for e in await collect(session, clock, lambda e: isinstance(e, ToolFinished))
                       if isinstance(e, ToolFinished)]
        assert not finished.ok and "declined" in finished.output
        await collect(session, clock, lambda e: isinstance(e, TranscriptDone) and "weather report" in e.text)
    assert ran == []


async def test_interrupt_cuts_at_the_virtual_listener_time() -> None:
    rec = WireRecorder()
    async with voice_session(rec, scenario="long") as (session, clock):
        await session.send_text("tell me a long story")
        started = await collect(session, clock, lambda e: isinstance(e, AssistantAudioStarted))
        t0 = started[-1].at
        while clock.now() < t0 + 1.0:
            clock.advance(0.02)
            await asyncio.sleep(0)
        returned = await session.interrupt()
        barge = next(e for e in await collect(session, clock, lambda e: isinstance(e, BargeIn)) if isinstance(e, BargeIn))
        assert returned == barge
        assert await session.interrupt() is None  # nothing audible any more
        assert not barge.cancelled  # the whole reply had already arrived: nothing to cancel
        await collect(session, clock, lambda e: isinstance(e, StateChanged) and e.state == "listening")
    (truncate,) = sent(rec, "conversation.item.truncate")
    assert truncate["audio_end_ms"] == barge.audio_end_ms
    assert 1000 <= truncate["audio_end_ms"] <= 1040  # heard from the first block to the interrupt
    assert sent(rec, "response.cancel") == []


async def test_a_dropped_connection_is_restored_and_the_session_goes_on() -> None:
    rec, clock = WireRecorder(), VirtualClock()
    flaky = ServerConfig(port=0, voice="tone", speed=float("inf"), faults=FaultConfig(drop_after_events=8))
    healthy = ServerConfig(port=0, voice="tone", speed=float("inf"))
    async with serve(flaky) as first, serve(healthy) as second:
        urls = [first.url, second.url]

        async def connector() -> Any:  # the first connection drops mid-response; the next one holds
            return await connect(urls.pop(0) if len(urls) > 1 else urls[0], "sk-test", on_wire=rec)

        attempts: list[int] = []

        def backoff(attempt: int) -> float:
            attempts.append(attempt)
            return 0.5

        settings = SessionSettings(api_key="sk-test", turn_detection="none", reconnect_attempts=2)
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                                backoff=backoff) as session:
            await session.send_text("hello")
            lost = await collect(session, clock, lambda e: isinstance(e, ConnectionRestored))
            drop = next(e for e in lost if isinstance(e, ConnectionLost))
            assert drop.code == 1006 and attempts == [0]
            assert lost[-1].at - drop.at >= 0.5  # the injected backoff, on the session's clock
            assert lost[-1].replayed_items >= 1  # the user's message was recreated on the new server
            await session.send_text("are you still there?")
            done = await collect(session, clock, lambda e: isinstance(e, ResponseFinished))
            assert done[-1].status == "completed"
    rec.verify()
    assert len(sent(rec, "session.update")) == 2  # the configuration went to the new connection too


COMMANDS = {
    "send_text": lambda s: s.send_text("hello"),
    "interrupt": lambda s: s.interrupt(),
    "start_talking": lambda s: s.start_talking(),
    "stop_talking": lambda s: s.stop_talking(),
    "update": lambda s: s.update(instructions="Be brief."),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
async def test_a_command_before_the_session_opens_is_one_clear_error(command: str) -> None:
    session = VoiceSession(SessionSettings(api_key="sk-test"), output=ClockedOutput(VirtualClock()))
    with pytest.raises(ConfigurationError, match="not open yet"):
        await COMMANDS[command](session)
    assert len(session.mirror) == 0 and session.settings.instructions != "Be brief."


@pytest.mark.parametrize("command", sorted(COMMANDS))
async def test_a_command_after_the_session_closed_is_one_clear_error_and_changes_nothing(command: str) -> None:
    rec = WireRecorder()
    async with voice_session(rec) as (session, _clock):
        pass
    items = [item.id for item in session.mirror.items()]
    instructions = session.settings.instructions
    with pytest.raises(ConfigurationError, match="the session is closed"):
        await COMMANDS[command](session)
    assert [item.id for item in session.mirror.items()] == items  # nothing the server never got
    assert session.settings.instructions == instructions


@pytest.mark.parametrize("bad", ["nope"])
async def test_update_rejects_unknown_tools(bad: str) -> None:
    rec = WireRecorder()
    async with voice_session(rec, tools=weather_tools([])) as (session, _clock):
        with pytest.raises(Exception, match="no such tool"):
            await session.update(tools=[bad])
        await session.update(instructions="Be brief.", tools=["get_time"])
    update = sent(rec, "session.update")[-1]["session"]
    assert update["instructions"] == "Be brief." and [t["name"] for t in update["tools"]] == ["get_time"]


async def test_a_session_over_webrtc_hears_the_track_and_cuts_on_interrupt() -> None:
    clock = VirtualClock()
    async with serve(ServerConfig(port=0, voice="tone", scenario="long")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none", transport="webrtc")
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock) as session:
            await session.send_text("tell me a long story")
            started = await collect(session, clock, lambda e: isinstance(e, StateChanged) and e.state == "speaking",
                                    step=0.005)
            assert any(isinstance(e, AssistantAudioStarted) for e in started)  # the track's audio reached the listener
            for _ in range(10):  # let some of the track's audio reach the listener
                clock.advance(0.02)
                await asyncio.sleep(0.02)
            barge = await session.interrupt()
            assert barge is not None and barge.server_cuts and barge.audio_end_ms is None
            assert barge.heard_ms > 0
            await collect(session, clock, lambda e: isinstance(e, ResponseFinished) and e.status == "cancelled",
                          step=0.005)


def test_the_default_backoff_doubles_up_to_its_cap_with_bounded_jitter() -> None:
    delay = exponential_backoff(0.2, 5.0, jitter=0.2, rng=random.Random(7))
    values = [delay(a) for a in range(8)]
    for attempt, value in enumerate(values):
        base = min(5.0, 0.2 * 2 ** attempt)
        assert 0.8 * base <= value <= 1.2 * base
    assert len(set(values)) == len(values)  # spread, not lock-step across sessions


@pytest.mark.parametrize("api", ["realtime", "live"])
async def test_a_server_on_this_machine_needs_no_key_and_any_other_one_line_naming_it(
        monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    """As on the command line: ``voxline serve`` on loopback takes the session without a key. Before, the library
    refused it, and its advice (point VOXLINE_URL at a local server) did not help."""
    from tests.support.session_events import until

    for name in ("OPENAI_API_KEY", "VOXLINE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0)) as server:
        settings = SessionSettings(url=server.url, api=api, turn_detection="none")
        assert settings.api_key is None
        async with VoiceSession(settings) as session:
            assert session.connected
            if api == "realtime":
                await session.send_text("hello")
                await until(session, lambda e: isinstance(e, ResponseFinished))
    with pytest.raises(ConfigurationError) as refused:
        async with VoiceSession(SessionSettings(url="wss://api.example.com/v1", api=api)):
            pass
    assert str(refused.value) == ("no API key for wss://api.example.com/v1: give the settings an api_key, or set "
                                  "OPENAI_API_KEY (a server on this machine, such as voxline serve's, needs none)")


async def test_a_key_in_the_urls_userinfo_is_the_sessions_key_and_registered_as_a_secret() -> None:
    """With no api_key, the URL's own key (ws://user:KEY@host) is the session's, whatever the transport, and it is
    registered for redaction as it is taken: no log or error of any layer shows it, whatever its shape."""
    from voxline.base.redaction import redact
    from voxline.session.keys import connection_key

    key = "plain-userinfo-key-0123456789"
    assert connection_key(SessionSettings(url=f"wss://user:{key}@api.example.com/v1")) == key
    assert key not in redact(f"refused: {key}")  # before any transport, or the server below, has seen it
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=key)) as server:
        settings = SessionSettings(url=server.url.replace("ws://", f"ws://user:{key}@", 1), turn_detection="none")
        async with VoiceSession(settings) as session:  # the server takes only that key
            assert session.connected


async def test_a_close_while_the_session_opens_leaves_it_closed_whenever_it_comes() -> None:
    """``aclose()`` from another task while ``__aenter__`` was connecting: the open went on, the session's loops ran
    on a connection nobody could close (a second ``aclose()`` did nothing), and commands said it was closed."""
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        outcomes = set()
        for steps in range(0, 60, 3):  # the close comes this many loop passes into the open
            session = VoiceSession(SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none"),
                                   output=ClockedOutput(VirtualClock()))
            opener = asyncio.create_task(session.__aenter__())
            for _ in range(steps):
                await asyncio.sleep(0)
            await session.aclose()
            try:
                await opener
                outcomes.add("opened, then closed")
            except ConfigurationError as refused:
                if str(refused).startswith("a closed session cannot be opened again"):  # closed before it began
                    outcomes.add("closed before opening")
                else:
                    assert str(refused) == "the session was closed (aclose) while it was being opened"
                    outcomes.add("closed while opening")
            await session.aclose()
            conn = session._link.conn
            assert conn is None or conn.closed, steps
            assert not session.connected and "open" not in repr(session), (steps, repr(session))
            assert not [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == "guarded"]
            with pytest.raises(ConfigurationError, match="closed"):
                await session.send_text("hello")
        assert "closed while opening" in outcomes  # the window was hit, not only a close after the open
