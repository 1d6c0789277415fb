"""The bare-receiver floor of the concurrent benchmark: what N sessions cost a client that does nothing.

Each floor session opens a WebSocket with ``websockets`` alone, streams the same recording as
``input_audio_buffer.append`` frames in real time (40 ms chunks, ``pybase64``), and decodes every
frame it receives (``json.loads``, the audio deltas with ``pybase64``), with no playout, no
barge-in handling, no conversation state. It is the least any client of the service must spend;
:mod:`benchmarks.bench_concurrent` reports voxline's CPU per session as a ratio to it, measured
in the same run against a fresh server of the same kind, on the same event loop as voxline's sessions.

The *lean* floor (``lean=True``) does the same work with less machinery around it: one
:class:`asyncio.Protocol` per session drives websockets' sans-I/O protocol and decodes each frame
inside the socket's read callback (no reader task, no future per message, no async send). It is
what a Python asyncio client spends on this workload when it spends nothing beyond the wire.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pybase64
from websockets.asyncio.client import connect
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from .common import ratio
from .concurrent_sessions import run_on_command_loop

__all__ = ["CHUNK_S", "run_floor"]

CHUNK_S = 0.040
OPEN_TIMEOUT_S = 30.0
_RATE = 24_000


def _appends(samples: npt.NDArray[np.int16]) -> Iterator[tuple[float, str]]:
    """The recording as ``input_audio_buffer.append`` frames, each with when it is due (s from the start)."""
    step = int(CHUNK_S * _RATE)
    data = samples.astype("<i2").tobytes()
    for k, begin in enumerate(range(0, len(samples), step)):
        chunk = pybase64.b64encode(data[2 * begin: 2 * (begin + step)]).decode("ascii")
        yield (k + 1) * CHUNK_S, json.dumps({"type": "input_audio_buffer.append", "audio": chunk})


async def _one(url: str, samples: npt.NDArray[np.int16], run_s: float, counts: list[int]) -> None:
    async with connect(f"{url}/realtime?model=gpt-realtime", additional_headers={"Authorization": "Bearer local"},
                       max_size=16 * 1024 * 1024, compression=None) as ws:
        # the server's defaults are the sessions' settings (server VAD, no transcription): no session.update
        async def receive() -> None:
            try:
                async for text in ws:
                    event = json.loads(text)
                    if event.get("type") == "response.output_audio.delta":
                        counts[0] += len(pybase64.b64decode(event["delta"])) // 2
                    counts[1] += 1
            except ConnectionClosed:
                return

        reader = asyncio.create_task(receive())
        loop = asyncio.get_running_loop()
        start = loop.time()
        for due, frame in _appends(samples):
            await asyncio.sleep(max(0.0, start + due - loop.time()))
            await ws.send(frame)
        await asyncio.sleep(max(0.0, start + run_s - loop.time()))
        reader.cancel()


class _Lean(asyncio.Protocol):
    """One lean floor session's socket: websockets' sans-I/O protocol, every frame decoded as it is read."""

    def __init__(self, url: str, counts: list[int]) -> None:
        self.protocol = ClientProtocol(parse_uri(url), max_size=16 * 1024 * 1024)
        self.counts = counts
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's does not derive from asyncio's
        request = self.protocol.connect()
        request.headers["Authorization"] = "Bearer local"
        self.protocol.send_request(request)
        self._write()

    def _write(self) -> None:
        assert self.transport is not None
        for data in self.protocol.data_to_send():
            if data:
                self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.protocol.receive_data(data)
        for event in self.protocol.events_received():
            if isinstance(event, Response):
                if not self.opened.done():
                    self.opened.set_result(None)
            elif event.opcode is Opcode.TEXT:
                message = json.loads(event.data)
                if message.get("type") == "response.output_audio.delta":
                    self.counts[0] += len(pybase64.b64decode(message["delta"])) // 2
                self.counts[1] += 1
        self._write()  # a pong, a close reply

    def send(self, text: str) -> None:
        self.protocol.send_text(text.encode())
        self._write()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionError("the server closed the connection"))


async def _one_lean(url: str, samples: npt.NDArray[np.int16], run_s: float, counts: list[int]) -> None:
    ws_url = f"{url}/realtime?model=gpt-realtime".replace("http://", "ws://", 1)
    where = parse_uri(ws_url)
    loop = asyncio.get_running_loop()
    transport, session = await loop.create_connection(lambda: _Lean(ws_url, counts), where.host, where.port)
    try:
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_S):  # a handshake that never ends is a failed session, not a hang
                await session.opened
        except TimeoutError:
            raise ConnectionError(f"no WebSocket handshake within {OPEN_TIMEOUT_S:g} s") from None
        start = loop.time()
        for due, frame in _appends(samples):
            await asyncio.sleep(max(0.0, start + due - loop.time()))
            session.send(frame)
        await asyncio.sleep(max(0.0, start + run_s - loop.time()))
    finally:
        transport.abort()


async def _all(n: int, url: str, samples: npt.NDArray[np.int16], run_s: float,
               lean: bool) -> tuple[list[BaseException | None], list[int]]:
    counts = [0, 0]  # audio samples decoded, frames received
    one = _one_lean if lean else _one
    results = await asyncio.gather(*(one(url, samples, run_s, counts) for _ in range(n)), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results], counts


def run_floor(n: int, url: str, samples: npt.NDArray[np.int16], run_s: float, *, lean: bool = False) -> dict[str, Any]:
    """``n`` bare receivers (lean ones with ``lean``) at once for ``run_s`` seconds each; their CPU per
    session-second."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    failures, counts = run_on_command_loop(_all(n, url, samples, run_s, lean))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    failed = [f"{type(e).__name__}: {e}"[:200] for e in failures if e is not None]
    session_s = run_s * (n - len(failed))
    return {
        "client": "asyncio.Protocol + websockets' sans-I/O protocol" if lean else "websockets' asyncio client",
        "sessions": n,
        "failed": len(failed),
        "failures": sorted(set(failed))[:3],
        "frames_received": counts[1],
        "audio_s_decoded": round(counts[0] / _RATE, 1),
        "session_seconds": round(session_s, 2),
        "wall_s": round(wall1 - wall0, 2),
        "client_cpu_s": round(cpu1 - cpu0, 3),
        "client_cpu_per_session_s": ratio(cpu1 - cpu0, session_s, 5),
    }
