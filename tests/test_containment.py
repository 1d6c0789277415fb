"""No server frame, however malformed, ends a session: each is a SessionError and the session goes on.

Every frame below killed a VoiceSession once. Each is sent by a fake server between valid
frames; afterwards the session must still play a valid audio delta, and report the bad
frame as one ``SessionError``. Work on a frame is bounded by its size.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

import pytest

from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.transports.base import memory_pair
from voxline.session.events import SessionError
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

SESSION = {"type": "session.created", "event_id": "e0", "session": {
    "type": "realtime", "id": "sess_1", "object": "realtime.session", "model": "gpt-realtime",
    "output_modalities": ["audio"], "audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}}}}}
CREATED = {"type": "response.created", "event_id": "e1",
           "response": {"id": "r1", "object": "realtime.response", "status": "in_progress", "output": []}}
ADDED = {"type": "conversation.item.added", "event_id": "e2", "previous_item_id": None,
         "item": {"id": "i1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}


def delta(b64: str, **changes: Any) -> dict[str, Any]:
    frame = {"type": "response.output_audio.delta", "event_id": "e3", "response_id": "r1", "item_id": "i1",
             "output_index": 0, "content_index": 0, "delta": b64}
    return frame | changes


def done(status: Any, rid: Any = "r1") -> dict[str, Any]:
    return {"type": "response.done", "event_id": "e9",
            "response": {"id": rid, "object": "realtime.response", "status": status, "output": []}}


GOOD_AUDIO = "AAAA" * 40  # 120 bytes: 60 samples of silence

BAD = {
    "invalid base64": delta("!!!!"),
    "bad padding": delta("AAA"),
    "non-ASCII base64": delta("AAé="),
    "odd-length PCM16": delta("AA=="),
    "content_index 1e6": delta(GOOD_AUDIO, content_index=1_000_000),
    "negative content_index": delta(GOOD_AUDIO, content_index=-5),
    "response_id object": delta(GOOD_AUDIO, response_id={}),
    "response.done in_progress": done("in_progress"),
    "response.done unknown status": done("weird"),
    "response.done id object": done("completed", rid={}),
    "item type a list": {"type": "conversation.item.added", "event_id": "e5", "previous_item_id": None,
                         "item": {"id": "i9", "type": ["message"], "role": "user", "content": []}},
    "call_id object": {"type": "response.function_call_arguments.done", "event_id": "e", "response_id": "r1",
                       "item_id": "f1", "output_index": 0, "call_id": {}, "name": "x", "arguments": "{}"},
    "transcript at content_index 1e6": {"type": "response.output_audio_transcript.delta", "event_id": "e",
                                        "response_id": "r1", "item_id": "i1", "output_index": 0,
                                        "content_index": 1_000_000, "delta": "hi"},
    "not JSON": "{nope",
    "a JSON array": "[1, 2]",
    "null type": '{"type": null}',
    "error without an object": '{"type": "error", "error": "boom"}',
    "deeply nested": "[" * 100_000 + "]" * 100_000,
    "item_id object": {"type": "conversation.item.deleted", "event_id": "e", "item_id": {}},
    "binary garbage": "\udcff\x00\x01",
}


async def _session_with(frames: list[Any]) -> tuple[list[Any], int]:
    """A session fed ``frames`` (then a valid delta); its events and the samples it queued to play."""
    clock = VirtualClock()
    client, server = memory_pair()

    async def connector() -> RealtimeConnection:
        return RealtimeConnection(client)

    settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=0)
    session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
    async with session:
        for frame in [SESSION, CREATED, ADDED, *frames, delta(GOOD_AUDIO)]:
            await server.send(frame if isinstance(frame, str) else json.dumps(frame))
        for _ in range(200):
            await asyncio.sleep(0)
        assert session.connected
        queued = session.output.playout.received_samples("i1")
        events = session.pending_events()
    return events, queued


@pytest.mark.parametrize("frame", list(BAD.values()), ids=list(BAD))
async def test_a_malformed_frame_is_reported_and_the_session_goes_on(frame: Any) -> None:
    events, queued = await _session_with([frame])
    errors = [e for e in events if isinstance(e, SessionError)]
    assert errors and all(not e.fatal and e.code == "malformed_event" for e in errors), errors
    assert all("\n" not in e.message for e in errors)
    assert queued == 60  # the valid delta after it still plays


async def test_all_of_them_in_a_row() -> None:
    events, queued = await _session_with(list(BAD.values()))
    assert len([e for e in events if isinstance(e, SessionError)]) == len(BAD)
    assert queued == 60


def test_work_on_a_frame_is_bounded_by_its_size() -> None:
    """A 150-byte frame naming content part 1,000,000 must not allocate for a million parts."""
    protocol = RealtimeProtocol()
    protocol.receive(json.dumps(SESSION))
    protocol.receive(json.dumps(CREATED))
    frames = [json.dumps(delta(GOOD_AUDIO, content_index=1_000_000)),
              json.dumps(BAD["transcript at content_index 1e6"])]
    tracemalloc.start()
    try:
        for frame in frames:
            protocol.receive(frame)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    assert [type(e).__name__ for e in protocol.events()][-2:] == ["MalformedServerEvent"] * 2


async def _replying(server: Any, clock: VirtualClock) -> None:
    """A reply of a second of silence plays for 0.4 s of the session's clock."""
    for frame in [SESSION, CREATED, ADDED, delta("AAAA" * 16_000)]:
        await server.send(json.dumps(frame))
    for _ in range(20):
        for _ in range(20):
            await asyncio.sleep(0)
        clock.advance(0.02)


async def _talked_over(server: Any, clock: VirtualClock) -> None:
    """:func:`_replying`; then the user's speech starts."""
    await _replying(server, clock)
    await server.send(json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "e7",
                                  "audio_start_ms": 100, "item_id": "u1"}))


def _on_an_output_that_cannot_drop(failure: BaseException) -> tuple[VoiceSession, Any, VirtualClock]:
    """A session, its server's end and its clock, on an output whose ``discard_pending`` raises ``failure``."""
    clock = VirtualClock()
    client, server = memory_pair()

    class BrokenOutput(ClockedOutput):
        def discard_pending(self, cut: Any) -> None:
            raise failure

    async def connector() -> RealtimeConnection:
        return RealtimeConnection(client)

    settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=0)
    output = BrokenOutput(clock, latency_s=0.1)  # audio sits in the "device": a cut revokes some
    return VoiceSession(settings, output=output, clock=clock, connector=connector), server, clock


async def test_a_failing_output_on_a_barge_in_is_reported_and_the_session_goes_on() -> None:
    session, server, clock = _on_an_output_that_cannot_drop(OSError("the sound device went away"))
    async with session:
        await _talked_over(server, clock)
        for _ in range(100):
            await asyncio.sleep(0)
        assert session.connected
        events = session.pending_events()
        errors = [e for e in events if isinstance(e, SessionError)]
    assert [e.code for e in errors] == ["discard_failed"] and "sound device went away" in errors[0].message
    assert any(type(e).__name__ == "BargeIn" for e in events)  # the cut stands, and is said (before: dropped)


@pytest.mark.parametrize("failure", [OSError("the sound device went away"), SystemExit("the output gave up")],
                         ids=["OSError", "SystemExit"])
async def test_an_interrupt_whose_output_fails_to_drop_its_audio_returns_the_cut_and_reports_it(
        failure: BaseException) -> None:
    """interrupt() raised what the app's output raised (a SystemExit included) to its caller."""
    session, server, clock = _on_an_output_that_cannot_drop(failure)
    async with session:
        await _replying(server, clock)
        barge_in = await session.interrupt()
        assert barge_in is not None and session.connected
        errors = [e for e in session.pending_events() if isinstance(e, SessionError)]
    assert [e.code for e in errors] == ["discard_failed"]


def test_the_in_process_engine_answers_its_own_failure_with_a_server_error() -> None:
    """replay --fast runs the engine in process; a bug there is an error event, as over a socket."""
    from voxline.realtime.server.engine.core import Engine
    from voxline.realtime.server.engine.scenario import load_scenario
    from voxline.realtime.server.engine.state import EngineConfig
    from voxline.realtime.server.engine.voices import make_synth
    from voxline.realtime.server.net.inprocess import EngineTransport
    from voxline.session.lockstep import run_lockstep

    clock = VirtualClock()
    synth, _ = make_synth("tone")

    class Faulty(Engine):
        def receive(self, frame: str | bytes, now: float) -> Any:
            if "conversation.item.retrieve" in str(frame):
                raise RuntimeError("a bug in the engine")
            return super().receive(frame, now)

    async def main() -> list[str]:
        engine = Faulty(EngineConfig(), load_scenario("default"), synth, wall_time=clock.wall())
        transport = EngineTransport(engine, clock, synth)
        await transport.send(json.dumps({"type": "conversation.item.retrieve", "item_id": "x"}))
        kinds = []
        for _ in range(3):
            kinds.append(json.loads(await transport.recv()))
        await transport.send(json.dumps({"type": "input_audio_buffer.clear"}))
        kinds.append(json.loads(await transport.recv()))
        return [k["type"] + ("" if k["type"] != "error" else ":" + k["error"]["type"]) for k in kinds]

    kinds = run_lockstep(main(), clock)
    assert kinds == ["session.created", "conversation.created", "error:server_error", "input_audio_buffer.cleared"]


async def test_a_speaker_whose_restart_never_returns_is_reported_and_the_session_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A device unplugged while a barge-in restarted its stream left PortAudio's start() waiting for ever: the
    session awaited it (no more events, no barge-in), its close and the process's exit waited too (the call ran on
    the loop's default executor, which both join). The restart runs on a daemon thread, awaited a bounded time."""
    import threading

    from voxline.session import output_cut

    monkeypatch.setattr(output_cut, "DISCARD_TIMEOUT_S", 0.2)
    clock = VirtualClock()
    client, server = memory_pair()
    release = threading.Event()

    class StuckOutput(ClockedOutput):
        def discard_pending(self, cut: Any) -> None:
            release.wait()  # a driver call that does not return until the test lets it

    async def connector() -> RealtimeConnection:
        return RealtimeConnection(client)

    settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=0)
    output = StuckOutput(clock, latency_s=0.1)
    output.discard_blocks = True  # as a sound device's: the restart goes to a thread
    session = VoiceSession(settings, output=output, clock=clock, connector=connector)
    try:
        async with session:
            await _talked_over(server, clock)
            errors: list[SessionError] = []
            for _ in range(1000):  # a guard of ten seconds, not a timing: the error comes after 0.2 s of real time
                errors += [e for e in session.pending_events() if isinstance(e, SessionError)]
                if errors:
                    break
                await asyncio.sleep(0.01)
            assert [e.code for e in errors] == ["speaker_stuck"], errors
            assert session.connected and not release.is_set()
            await session.send_text("still here")  # the session goes on with its restart still stuck
            sent = json.loads(await asyncio.wait_for(server.recv(), 5))
            while sent["type"] != "conversation.item.create":
                sent = json.loads(await asyncio.wait_for(server.recv(), 5))
    finally:
        release.set()


async def test_a_server_that_refuses_a_connection_at_once_is_named_by_the_failed_open() -> None:
    """A server that refuses a connection (a bad key) sends an ``error`` and closes at once, as the service does: the
    configuration sent meets the close, and the open failed with "the server closed the connection while it was
    being set up (1008 …)", what the server said unread."""
    from voxline.realtime.errors import ConnectionFailed

    clock = VirtualClock()
    client, server = memory_pair()
    refusal = {"type": "error", "event_id": "event_1", "error": {
        "type": "invalid_request_error", "code": "invalid_api_key",
        "message": "Incorrect API key provided: sk-proj-********************wxyz."}}
    await server.send(json.dumps(refusal))
    await server.close(1008, "bad key")

    async def connector() -> RealtimeConnection:
        return RealtimeConnection(client)

    settings = SessionSettings(api_key="k", turn_detection="none", reconnect_attempts=0)
    session = VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector)
    with pytest.raises(ConnectionFailed) as failed:
        async with session:
            pass
    assert str(failed.value) == ("the server closed the connection while it was being set up: it said server: "
                                 "Incorrect API key provided: [redacted] (invalid_api_key); it closed the connection "
                                 "(1008 bad key)")


async def test_a_live_server_that_refuses_at_once_is_named_too() -> None:
    """GPT-Live's refusal of a key names no command of the client's: it comes as the protocol's own error event, and
    the failed setup said nothing of it."""
    from voxline.realtime.live.protocol import LiveProtocol
    from voxline.session.link import _said_before_closing

    client, server = memory_pair()
    await server.send(json.dumps({"type": "error", "event_id": "event_1", "error": {
        "type": "invalid_request_error", "code": "invalid_api_key", "message": "Incorrect API key provided."}}))
    await server.close(1008, "bad key")
    said = await _said_before_closing(RealtimeConnection(client, LiveProtocol()), VirtualClock())
    assert said == "server: Incorrect API key provided (invalid_api_key)"
