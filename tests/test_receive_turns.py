"""Sessions on one loop take turns with the frames of their replies (voxline.base.loop_share).

Eight sessions each find 300 audio deltas already waiting. Without turns a session handles
all of its frames in one step, and one pass of the event loop holds hundreds of frames;
with them the frames spread over many passes, and every frame is still handled.

A reply whose queued audio runs low (it has just started, or it fell behind) does not take
turns: its listener would hear a gap while it waited behind other sessions' backlogs.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import NullSink
from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.transports.base import memory_pair
from voxline.session import SessionSettings, VoiceSession
from voxline.audio.clocked_output import ClockedOutput
from voxline.base.loop_share import STEPS_PER_PASS

from tests.support.reply_frames import reply_frames

SESSIONS = 8
DELTAS = 300


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
        for text in reply_frames(n, DELTAS, 48):
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


LOW_BULK = 60  # sessions whose replies have plenty queued when the burst comes


def _frame(n: int, k: int, event: dict[str, object]) -> str:
    return json.dumps({"event_id": f"event_low_{n}_{k}", **event})


def _deltas(n: int, first: int, count: int, samples: int) -> list[str]:
    audio = base64.b64encode(np.zeros(samples, "<i2").tobytes()).decode()
    return [_frame(n, first + k, {"type": "response.output_audio.delta", "response_id": f"resp_{n}",
                                  "item_id": f"item_{n}", "output_index": 0, "content_index": 0, "delta": audio})
            for k in range(count)]


class _NotedPlayout(PlayoutBuffer):
    """A playout that notes, in one list for all sessions, each chunk of audio it is given."""

    def __init__(self, n: int, order: list[int]) -> None:
        super().__init__()
        self.n, self.order = n, order

    def enqueue(self, *args: Any, **kwargs: Any) -> Any:
        self.order.append(self.n)
        return super().enqueue(*args, **kwargs)


async def _low_run() -> tuple[list[int], int]:
    order: list[int] = []
    received = [0]

    def on_wire(direction: str, _text: str) -> None:
        received[0] += direction == "in"

    late = LOW_BULK  # the session whose reply starts during the burst, its frames the last to land
    servers, sessions = [], []
    for n in range(LOW_BULK + 1):
        client, server = memory_pair(max_queue=1000)
        await server.send(reply_frames(n, 0, 0)[0])  # session.created
        servers.append(server)

        async def connect(client=client) -> RealtimeConnection:  # type: ignore[no-untyped-def]
            return RealtimeConnection(client, on_wire=on_wire)

        settings = SessionSettings(api_key="local", liveness_timeout_s=0)
        output = ClockedOutput(RealClock(), NullSink(), playout=_NotedPlayout(n, order))
        sessions.append(VoiceSession(settings, output=output, connector=connect))
    for n in range(LOW_BULK):  # the others' replies: 2 s queued each, still streaming
        for text in reply_frames(n, 20, 2400)[1:]:
            await servers[n].send(text)
    for session in sessions:
        await session.__aenter__()
    phase_one = LOW_BULK * 22 + LOW_BULK + 1
    async with asyncio.timeout(30):  # a guard against a hang, not a timing check
        while received[0] < phase_one:
            await asyncio.sleep(0.001)
    order.clear()
    for n in range(LOW_BULK):  # the burst: 40 more deltas for every streaming reply, then the new reply
        for text in _deltas(n, 100, 40, 2400):
            await servers[n].send(text)
    for text in reply_frames(late, 10, 480)[1:]:  # 20 ms deltas: 150 ms of them is eight frames
        await servers[late].send(text)
    async with asyncio.timeout(30):
        while received[0] < phase_one + LOW_BULK * 40 + 12:
            await asyncio.sleep(0.001)
    for session in sessions:
        await session.aclose()
    return order, late


def test_a_reply_whose_queued_audio_runs_low_does_not_wait_behind_the_others_backlog() -> None:
    order, late = asyncio.run(_low_run())
    mine = [i for i, n in enumerate(order) if n == late]
    assert len(mine) == 10 and len(order) == LOW_BULK * 40 + 10  # every frame handled
    # its first eight deltas (until 150 ms is queued) go on one after the other; waiting its
    # turn behind sixty backlogs, a gap of dozens of the others' frames opens after the first few
    between = mine[7] - mine[0] - 7
    assert between <= STEPS_PER_PASS
