"""Sessions on one loop take turns with the frames of their replies (voxline.base.loop_share).

Eight sessions each find 300 audio deltas already waiting. Without turns a session handles
all of its frames in one step, and one pass of the event loop holds hundreds of frames;
with them the frames spread over many passes, and every frame is still handled.
"""

from __future__ import annotations

import asyncio

from voxline.audio.sinks import NullSink
from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.transports.base import memory_pair
from voxline.session import SessionSettings, VoiceSession
from voxline.audio.clocked_output import ClockedOutput

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
