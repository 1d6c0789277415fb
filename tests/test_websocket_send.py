"""The WebSocket transport's send: written at once when the connection is open and not
backed up, through websockets' own send otherwise; every frame arrives once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.server import serve as ws_serve

from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.transports.websocket import WebSocketTransport


async def _echo_count(received: list[str], ws: Any) -> None:
    async for message in ws:
        received.append(message)


@contextlib.asynccontextmanager
async def _connected(received: list[str]) -> AsyncIterator[WebSocketTransport]:
    """A transport connected to a loopback server that keeps what it receives; the server stops after."""
    server = await ws_serve(lambda ws: _echo_count(received, ws), "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        yield await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
    finally:
        server.close()
        await server.wait_closed()


async def test_the_installed_websockets_takes_the_direct_path_and_frames_arrive_once_in_order() -> None:
    received: list[str] = []
    async with _connected(received) as transport:
        assert transport._direct  # websockets as locked: the attributes the direct path reads are there
        calls: list[str] = []
        slow_send = transport._ws.send

        async def counted(message: Any, text: bool | None = None) -> None:
            calls.append(message)
            await slow_send(message, text)

        transport._ws.send = counted  # type: ignore[method-assign]
        frames = [json.dumps({"type": "input_audio_buffer.append", "event_id": f"e{i}", "audio": "AAAA" * i})
                  for i in range(200)]
        for frame in frames:
            await transport.send(frame)
        await transport.close()
        async with asyncio.timeout(5):
            while len(received) < len(frames):
                await asyncio.sleep(0.01)
        assert received == frames
        assert calls == []  # none went the slow way: the connection never backed up


async def test_a_backed_up_connection_waits_in_websockets_send_and_loses_nothing() -> None:
    received: list[str] = []
    reading = asyncio.Event()

    async def late_reader(ws: Any) -> None:
        await reading.wait()  # the server reads nothing at first: the client's socket fills up
        await _echo_count(received, ws)

    server = await ws_serve(late_reader, "127.0.0.1", 0, compression=None, max_size=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        ws = transport._ws
        frames = [json.dumps({"type": "input_audio_buffer.append", "event_id": f"e{i}", "audio": "A" * 1_000_000})
                  for i in range(40)]
        paused_before: list[bool] = []

        async def send_all() -> None:
            for frame in frames:
                paused_before.append(ws.paused)
                await transport.send(frame)

        sending = asyncio.ensure_future(send_all())
        async with asyncio.timeout(5):
            while not ws.paused:
                await asyncio.sleep(0.01)
        reading.set()
        async with asyncio.timeout(10):
            await sending
            while len(received) < len(frames):
                await asyncio.sleep(0.01)
        assert received == frames
        assert any(paused_before)  # a send found the connection backed up and waited in ws.send()
        await transport.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_send_after_the_close_raises_our_connection_closed() -> None:
    received: list[str] = []
    async with _connected(received) as transport:
        await transport.close(1000, "done")
        with pytest.raises(ConnectionClosed):
            await transport.send("{}")


async def test_a_socket_that_fails_under_a_direct_write_closes_the_connection_with_1006() -> None:
    received: list[str] = []
    async with _connected(received) as transport:
        ws = transport._ws

        def broken() -> None:
            raise OSError(32, "Broken pipe")

        ws.send_data = broken  # type: ignore[method-assign]
        with pytest.raises(ConnectionClosed) as closed:
            await transport.send("{}")
        assert closed.value.code == 1006 and "Broken pipe" in closed.value.reason
        assert transport.close_code == 1006