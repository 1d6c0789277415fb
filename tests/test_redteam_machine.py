"""Red-team cases for the session's split into a machine, its driver, the link and the input feed."""

from __future__ import annotations

import json

from voxline.base.clock import VirtualClock
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.transports.base import memory_pair
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.events import ConnectionLost, SessionError
from voxline.session.lockstep import run_lockstep
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession


class _Peer:
    """The client end of an in-memory socket whose pings are answered at once."""

    def __init__(self) -> None:
        self.client, self.server = memory_pair()
        self.media = None
        self.sent: list[dict[str, object]] = []

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))
        await self.client.send(text)

    async def recv(self) -> str:
        return await self.client.recv()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.client.close(code, reason)

    async def ping(self) -> None:
        return None


def test_a_question_after_a_long_quiet_spell_is_not_taken_for_a_silent_server() -> None:
    """The server's silence is counted from when it came to owe an answer, not from its last event:
    a user who speaks after a minute's quiet gives a live server its round trip to answer."""
    clock = VirtualClock(start=100.0)
    peers: list[_Peer] = []

    async def connector() -> RealtimeConnection:
        peer = _Peer()
        peers.append(peer)
        await peer.server.send(json.dumps(ev.server_event_sample("session.created")))
        return RealtimeConnection(peer)

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
