"""One WebSocket session: the engine driven by the connection and the clock.

Four jobs run in one ``TaskGroup`` next to the reader: a single writer sends
server events in the order the engine produced them; a pacer sleeps until the
engine's next due step (woken early when a client frame changes the schedule);
a voicer synthesizes the replies a response waits for, off the event loop
(:class:`~voxline.realtime.server.net.voicer.SpeechSupplier`); a hearer recognises user speech,
off the loop too (:class:`~voxline.realtime.server.net.hearer.HearingSupplier`); an expiry timer sends
``session_expired`` and closes with 1001. Faults from
:class:`~voxline.realtime.server.net.config.FaultConfig` are applied by the writer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.errors import ErrorSpec
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.net.config import ServerConfig
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.hearing.ears import Ears
from voxline.realtime.server.net.hearer import HearingSupplier
from voxline.realtime.server.net.voicer import SpeechSupplier

__all__ = ["Outbox", "close_reason", "run_engine", "send_error_and_close"]

log = logging.getLogger("voxline.server")


def close_reason(spec: ErrorSpec) -> str:
    """Close reasons like the service's: ``<error type>.<code>``."""
    return f"{spec.type}.{spec.code}" if spec.code else spec.type


class Outbox:
    """Server events in generation order, sent by one writer task."""

    def __init__(self, connection: ServerConnection, config: ServerConfig) -> None:
        self._connection = connection
        self._config = config
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent = 0

    def put_all(self, events: list[dict[str, Any]]) -> None:
        for ev in events:
            self._queue.put_nowait(ev)

    async def flush(self) -> None:
        await self._queue.join()

    async def run(self) -> None:
        """Send until the connection closes or a fault ends it."""
        faults = self._config.faults
        try:
            while True:
                ev = await self._queue.get()
                if faults.send_delay_s > 0:
                    await self._config.clock.sleep(faults.send_delay_s)
                text = json.dumps(ev)
                await self._connection.send(text)
                if self._config.on_wire is not None:
                    self._config.on_wire("out", text)
                self.sent += 1
                self._queue.task_done()
                if faults.drop_after_events is not None and self.sent >= faults.drop_after_events:
                    self._connection.transport.abort()
                    return
                if faults.close_after_events is not None and self.sent >= faults.close_after_events:
                    await self._connection.close(faults.close_code, "fault injected by the voxline local server")
                    return
        except ConnectionClosed:
            return


async def send_error_and_close(
    connection: ServerConnection, config: ServerConfig, event: dict[str, Any], code: int, reason: str
) -> None:
    """Send one ``error`` event, then close (used before a session starts)."""
    text = json.dumps(event)
    try:
        await connection.send(text)
        if config.on_wire is not None:
            config.on_wire("out", text)
        await connection.close(code, reason)
    except ConnectionClosed:
        return


async def run_engine(
    connection: ServerConnection, engine: Engine, config: ServerConfig, synth: Synth, ears: Ears | None = None
) -> None:
    """Drive ``engine`` over ``connection`` until either side ends the session; ``synth`` voices
    replies, ``ears`` (if any) hears user speech."""
    outbox = Outbox(connection, config)
    wakeup = asyncio.Event()

    def heard(events: list[dict[str, Any]]) -> None:
        outbox.put_all(events)
        voicer.check()
        wakeup.set()

    voicer = SpeechSupplier(engine, synth, config.clock, wakeup.set)
    hearer = HearingSupplier(engine, ears, config.clock, heard)
    outbox.put_all(engine.open())
    peer = _peer(connection)
    started = config.clock.now()
    log.info("session %s opened (WebSocket, %s)", engine.session_id, peer)
    try:
        await _serve(connection, engine, config, outbox, wakeup, voicer, hearer)
    finally:
        code = connection.close_code if connection.close_code is not None else "none"
        log.info("session %s closed (WebSocket, %s) after %.1f s, close code %s", engine.session_id, peer,
                 config.clock.now() - started, code)


def _peer(connection: ServerConnection) -> str:
    address = connection.remote_address
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else "unknown peer"


async def _serve(connection: ServerConnection, engine: Engine, config: ServerConfig, outbox: Outbox,
                 wakeup: asyncio.Event, voicer: SpeechSupplier, hearer: HearingSupplier) -> None:
    async with asyncio.TaskGroup() as group:
        jobs = [
            group.create_task(outbox.run()),
            group.create_task(_pace(engine, outbox, config, wakeup, voicer, hearer)),
            group.create_task(voicer.run()),
            group.create_task(hearer.run()),
            group.create_task(_expire(connection, engine, outbox, config)),
        ]
        try:
            await _read(connection, engine, outbox, config, wakeup, voicer, hearer)
        finally:
            for job in jobs:
                job.cancel()


async def _read(
    connection: ServerConnection,
    engine: Engine,
    outbox: Outbox,
    config: ServerConfig,
    wakeup: asyncio.Event,
    voicer: SpeechSupplier,
    hearer: HearingSupplier,
) -> None:
    clock = config.clock
    try:
        async for message in connection:
            if config.on_wire is not None:
                config.on_wire("in", message if isinstance(message, str) else f"<binary frame, {len(message)} bytes>")
            now = clock.now()
            try:
                outbox.put_all(engine.receive(message, now))
                outbox.put_all(engine.poll(now))
            except Exception:  # a bug of ours must not end the client's session: say so, as the service does
                log.exception("the engine failed on a client frame")
                outbox.put_all([engine.error(errors.server_error())])
            voicer.check()
            hearer.check()
            wakeup.set()
    except ConnectionClosed:
        return


async def _pace(
    engine: Engine, outbox: Outbox, config: ServerConfig, wakeup: asyncio.Event, voicer: SpeechSupplier,
    hearer: HearingSupplier,
) -> None:
    clock = config.clock
    while True:
        wakeup.clear()
        due = engine.next_due()
        if due is None:
            await wakeup.wait()
            continue
        delay = due - clock.now()
        if delay > 0:
            await first_of(clock.sleep(delay), wakeup.wait())
            continue
        outbox.put_all(engine.poll(clock.now()))
        voicer.check()
        hearer.check()


async def _expire(connection: ServerConnection, engine: Engine, outbox: Outbox, config: ServerConfig) -> None:
    await config.clock.sleep(config.max_session_s)
    events = engine.expire()
    outbox.put_all(events)
    await outbox.flush()
    spec_error = events[0]["error"]
    try:
        await connection.close(1001, f"{spec_error['type']}.{spec_error['code']}")
    except ConnectionClosed:
        return
