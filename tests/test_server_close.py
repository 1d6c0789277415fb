"""Every close the local server makes ends in bounded time, whether or not the client reads.

websockets' ``close()`` waits for the transport to drain before its own close deadline applies: a client that stopped
reading with megabytes written to it (a few ``conversation.item.retrieve`` of a large item) held the server's shutdown
until its TCP connection dropped."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import socket

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from voxline.base.clock import VirtualClock
from voxline.realtime.server import serve
from voxline.realtime.server.net.app import Server
from tests.support.local_server import AUTH, config

_BOUND_S = 10.0  # against a hang that lasts as long as the client's TCP connection


async def _stalled(server: Server, answered: asyncio.Event) -> ClientConnection:
    """A client with a small receive buffer that asks for ~20 MB of answers and reads none of them."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    ws = await websockets.connect(f"{server.url}/realtime?model=gpt-realtime", sock=sock, additional_headers=AUTH,
                                  max_size=None, max_queue=1, compression=None)
    audio = base64.b64encode(random.Random(7).randbytes(3_000_000)).decode()  # random: no compression shrinks it
    await ws.send(json.dumps({"type": "conversation.item.create", "item": {
        "id": "item_big", "type": "message", "role": "user", "content": [{"type": "input_audio", "audio": audio}]}}))
    for _ in range(8):
        await ws.send(json.dumps({"type": "conversation.item.retrieve", "item_id": "item_big"}))
    async with asyncio.timeout(_BOUND_S):
        await answered.wait()
    return ws


def _counting(retrieves: int) -> tuple[asyncio.Event, dict[str, object]]:
    answered = asyncio.Event()
    seen = [0]

    def on_wire(direction: str, text: str) -> None:
        if direction == "in" and '"conversation.item.retrieve"' in text:  # answered as it is read
            seen[0] += 1
            if seen[0] >= retrieves:
                answered.set()

    return answered, {"on_wire": on_wire}


async def test_shutdown_aborts_a_client_that_does_not_read_and_closes_the_others() -> None:
    before = asyncio.all_tasks()
    answered, wire = _counting(3)  # 12 MB of answers: far past what the socket buffers hold
    server = await serve(config(close_timeout_s=0.5, **wire))
    reader = await websockets.connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=AUTH)
    assert json.loads(await reader.recv())["type"] == "session.created"
    stalled = await _stalled(server, answered)
    try:
        async with asyncio.timeout(_BOUND_S):
            await server.close()
    finally:
        stalled.transport.abort()
    with pytest.raises(websockets.ConnectionClosedOK):
        async with asyncio.timeout(_BOUND_S):
            while True:
                await reader.recv()
    assert reader.close_code == 1001
    await stalled.wait_closed()
    assert stalled.close_code != 1001  # aborted: it never read the close frame
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_a_client_gone_while_its_answers_wait_does_not_hold_its_session_or_the_shutdown() -> None:
    """Frames read before the drop were still answered after the writer had stopped: what waited for room never
    got it, and the session's handler (and so the server's close) waited for ever."""
    before = asyncio.all_tasks()
    answered, wire = _counting(3)
    server = await serve(config(**wire))
    stalled = await _stalled(server, answered)
    stalled.transport.abort()
    await stalled.wait_closed()
    async with asyncio.timeout(_BOUND_S):
        await server.close()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_a_session_expiring_on_a_client_that_does_not_read_is_closed_within_the_close_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The expiry waited for its ``session_expired`` to be written before closing: for ever, for this client."""
    clock = VirtualClock()
    answered, wire = _counting(3)
    caplog.set_level(logging.INFO, logger="voxline.server")
    server = await serve(config(close_timeout_s=0.5, clock=clock, max_session_s=60.0, **wire))
    stalled = await _stalled(server, answered)
    try:
        clock.advance(60.0)
        async with asyncio.timeout(_BOUND_S):
            while not any("closed (WebSocket" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.05)
    finally:
        stalled.transport.abort()
        async with asyncio.timeout(_BOUND_S):
            await server.close()
