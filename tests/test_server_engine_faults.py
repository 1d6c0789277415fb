"""A bug of the local server's engine on any path of a WebSocket session (a client frame, a scheduled step, words
heard) is answered as the service answers its own: one ``server_error`` event, and the session goes on."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
import websockets

from voxline.base.audio_format import AudioFormat
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.hearing import HearingJob
from voxline.realtime.server.net.hearer import HearingSupplier


async def test_an_engine_failure_on_a_scheduled_step_is_a_server_error_event_not_a_1011(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = Engine.poll

    def flaky(self: Engine, now: float) -> list[dict[str, Any]]:
        if any(not run.done for run in self._state.runs):
            raise RuntimeError("boom")
        return real(self, now)

    monkeypatch.setattr(Engine, "poll", flaky)
    async with serve(ServerConfig(port=0, voice="tone", speed=math.inf)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime",
                                      additional_headers={"Authorization": "Bearer x"}) as ws:
            for _ in range(2):
                await ws.recv()
            await ws.send(json.dumps({"type": "response.create"}))
            seen = []
            while not seen or seen[-1]["type"] != "error":
                seen.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            assert seen[-1]["error"]["type"] == "server_error"
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))  # the session goes on
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "input_audio_buffer.cleared"


class _Engine:
    """The hearing side of an engine, whose answer to the first words heard is a bug."""

    def __init__(self) -> None:
        self.jobs = [HearingJob(f"item_{k}", b"", AudioFormat("pcm16", 24000), ()) for k in range(2)]
        self.heard: list[str] = []

    def take_hearing(self) -> list[HearingJob]:
        jobs, self.jobs = self.jobs, []
        return jobs

    def provide_hearing(self, item_id: str, text: str | None, now: float) -> list[dict[str, Any]]:
        if item_id == "item_0":
            raise RuntimeError("boom")
        self.heard.append(item_id)
        return [{"type": "conversation.item.input_audio_transcription.completed", "item_id": item_id}]

    def error(self, spec: errors.ErrorSpec) -> dict[str, Any]:
        return spec.to_event("event_1", None)


class _Ears:
    def hear(self, audio: bytes, fmt: AudioFormat, phrases: tuple[str, ...] = ()) -> str:
        return "hello"


async def test_an_engine_failure_on_words_heard_is_a_server_error_event_and_hearing_goes_on() -> None:
    engine = _Engine()
    delivered: list[dict[str, Any]] = []
    hearer = HearingSupplier(engine, _Ears(), ServerConfig().clock, delivered.extend)  # type: ignore[arg-type]
    task = asyncio.create_task(hearer.run())
    hearer.check()
    async with asyncio.timeout(10):
        while len(delivered) < 2 and not task.done():
            await asyncio.sleep(0.01)
    assert [e["type"] for e in delivered] == ["error", "conversation.item.input_audio_transcription.completed"]
    assert delivered[0]["error"]["type"] == "server_error" and engine.heard == ["item_1"]
    assert not task.done()
    task.cancel()
