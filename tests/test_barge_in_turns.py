"""When many sessions' users speak at once, every cut comes before the rest of the barge-ins.

Forty sessions on one loop play a reply; the server's ``speech_started`` reaches all of them
in the same pass of the loop. Each cut is made at once, where its listener is; what follows
a cut (the app's events, the metrics, the truncate on the wire) waits its turn on the loop's
share (:mod:`voxline.base.loop_share`), so no session's cut waits behind another's follow-up
work. Without the turns, each session would do its whole barge-in before the next one's cut.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import NullSink
from voxline.base.clock import RealClock
from voxline.base.loop_share import STEPS_PER_PASS
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.transports.base import MemoryTransport, memory_pair
from voxline.session import BargeIn, SessionSettings, VoiceSession
from voxline.audio.clocked_output import ClockedOutput

from tests.support.reply_frames import reply_frames

SESSIONS = 40
# ten seconds of reply each, in deltas of a second: the cuts come while every reply still plays,
# however long a loaded machine takes to take in the frames (the cut is made where the listener is)
REPLY = (10, 24000, 1000)
order: list[tuple[str, int]] = []  # ("cut" | "follow-up", session), in the order they happened
received = [0]  # frames the sessions have taken in


class _Playout(PlayoutBuffer):
    """A playout that notes when it is cut."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def interrupt(self, *args: Any, **kwargs: Any) -> Any:
        order.append(("cut", self.n))
        return super().interrupt(*args, **kwargs)


async def _run() -> list[VoiceSession]:
    clock = RealClock()
    sessions: list[VoiceSession] = []
    servers: list[MemoryTransport] = []
    for n in range(SESSIONS):
        client, server = memory_pair(max_queue=1000)
        for text in reply_frames(n, *REPLY):
            await server.send(text)
        servers.append(server)

        def on_wire(direction: str, text: str, n: int = n) -> None:
            received[0] += direction == "in"
            # the cut's message to the server: a truncate, or a delete if the listener had heard none
            if direction == "out" and ('"conversation.item.truncate"' in text or '"conversation.item.delete"' in text):
                order.append(("follow-up", n))

        async def connect(client: MemoryTransport = client, on_wire: Any = on_wire) -> RealtimeConnection:
            return RealtimeConnection(client, on_wire=on_wire)

        settings = SessionSettings(api_key="local", liveness_timeout_s=0)
        output = ClockedOutput(clock, NullSink(), playout=_Playout(n))
        sessions.append(VoiceSession(settings, output=output, clock=clock, connector=connect))
    for session in sessions:
        await session.__aenter__()
    async with asyncio.timeout(30):  # a guard against a hang, not a timing check
        # every reply taken in, and every listener has heard some of it (queued audio counts as
        # audible too, but a cut before the first heard sample deletes the item instead)
        while received[0] < SESSIONS * len(reply_frames(0, *REPLY)) or not all(
                s.output.playout.heard_samples(f"item_{n}", 0, s.output.now()) > 0 for n, s in enumerate(sessions)):
            await asyncio.sleep(0.005)
    for n, server in enumerate(servers):  # every user speaks at once: all frames land before the loop runs
        await server.send(json.dumps({"type": "input_audio_buffer.speech_started", "event_id": f"event_ss_{n}",
                                      "audio_start_ms": 0, "item_id": f"item_user_{n}"}))
    async with asyncio.timeout(30):
        while sum(1 for kind, _n in order if kind == "follow-up") < SESSIONS:
            await asyncio.sleep(0.005)
    for session in sessions:
        await session.aclose()
    return sessions


def test_every_cut_comes_before_all_but_a_few_of_the_follow_ups() -> None:
    order.clear()
    received[0] = 0
    sessions = asyncio.run(_run())
    cuts = [i for i, (kind, _n) in enumerate(order) if kind == "cut"]
    follow_ups = [i for i, (kind, _n) in enumerate(order) if kind == "follow-up"]
    assert len(cuts) == len(follow_ups) == SESSIONS  # every session cut once and told the server
    early = sum(1 for i in follow_ups if i < cuts[-1])
    # follow-ups that went before the last cut: a pass's turns, twice that if the share's pass
    # boundary (a callback of its own) runs among the cuts
    assert early <= 2 * STEPS_PER_PASS
    for session in sessions:  # and nothing of a barge-in was lost by waiting
        assert any(isinstance(event, BargeIn) for event in session.pending_events())
