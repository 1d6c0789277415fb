"""A TCP relay on loopback whose client sides can be cut while its server sides stay open: a drop the
server has not noticed yet, as when a laptop's Wi-Fi goes or a NAT forgets the flow."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["HalfOpenRelay", "half_open_relay"]


class HalfOpenRelay:
    def __init__(self, port: int) -> None:
        self.port = port
        self._clients: list[asyncio.StreamWriter] = []
        self._upstreams: list[asyncio.StreamWriter] = []
        self._pumps: set[asyncio.Task[None]] = set()

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._clients.append(writer)
        self._upstreams.append(up_writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(_pump(source, sink))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    def cut(self) -> None:
        """Every connection so far: the client's side reset, the server's left open and silent."""
        for task in list(self._pumps):
            task.cancel()
        for writer in self._clients:
            writer.transport.abort()
        self._clients.clear()

    async def close(self) -> None:
        self.cut()
        for writer in self._upstreams:
            writer.transport.abort()
        await asyncio.gather(*self._pumps, return_exceptions=True)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await source.read(65_536):
            sink.write(data)
            await sink.drain()


@contextlib.asynccontextmanager
async def half_open_relay(port: int) -> AsyncIterator[tuple[HalfOpenRelay, int]]:
    """A relay to ``127.0.0.1:port`` and the port it listens on."""
    relay = HalfOpenRelay(port)
    server = await asyncio.start_server(relay.relay, "127.0.0.1", 0)
    try:
        yield relay, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await relay.close()
        await server.wait_closed()
