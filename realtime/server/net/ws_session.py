"""One WebSocket session: the engine driven by the connection and the clock.

Four jobs run in one ``TaskGroup`` next to the reader: the outbox sends server events in
the order the engine produced them (written at once, in one socket write per batch, while the
socket takes them; else by its writer task; while more than :data:`UNREAD_BYTES` of them wait, the reader takes no
more client frames); a pacer sleeps until the engine's next due step
(woken early when a client frame brings the schedule forward; on a real clock each of its steps
takes a turn on the loop's share, so streaming never holds up the reading of client audio), and
holds back while the socket does not take what was written, so the engine's schedule never runs
far ahead of what the client reads (a reply a barge-in cancels is not queued in full ahead of the
``speech_started``);
a voicer synthesizes the replies a response waits for, off the event loop
(:class:`~voxline.realtime.server.net.voicer.SpeechSupplier`); a hearer recognises user speech,
off the loop too (:class:`~voxline.realtime.server.net.hearer.HearingSupplier`); an expiry timer sends
``session_expired`` and closes with 1001. The engine raising (a bug of ours) on a client frame, a scheduled step,
a reply's speech or words heard is one ``server_error`` event, and the session goes on (a step it failed on is not
tried again while it is the one due); a voice that raises makes its reply silent. Faults from
:class:`~voxline.realtime.server.net.config.FaultConfig` are applied by the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections import deque
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from voxline.base.clock import RealClock
from voxline.base.loop_share import SHORT_OF_AUDIO_S, SHORT_RUN, Slices, loop_share

from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.errors import ErrorSpec
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.wire_json import encode_event
from voxline.realtime.server.net.config import ServerConfig, wire_text
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.hearing.ears import Ears
from voxline.realtime.server.net.hearer import HearingSupplier, failed
from voxline.realtime.server.net.voicer import SpeechSupplier

__all__ = ["UNREAD_BYTES", "Outbox", "close_reason", "run_engine", "send_error_and_close"]

log = logging.getLogger("voxline.server")

UNREAD_BYTES = 16 * 1024 * 1024
"""Events a client may leave unread before its session stops reading the client's frames until it catches up: a
``conversation.item.retrieve`` of a few dozen bytes is answered with megabytes, and a client that sends such frames
without reading would otherwise have the server hold every answer."""


def close_reason(spec: ErrorSpec) -> str:
    """Close reasons like the service's: ``<error type>.<code>``."""
    return f"{spec.type}.{spec.code}" if spec.code else spec.type


class Outbox:
    """Server events in generation order: written at once while the socket takes them, else by one writer task.

    Events handed over while nothing waits and the socket is not paused are encoded and
    written in one socket write, before :meth:`put_all` returns; with faults configured every
    event goes through the writer, which applies them.
    """

    def __init__(self, connection: ServerConnection, config: ServerConfig) -> None:
        self._connection = connection
        self._config = config
        self._queue: deque[str] = deque()  # encoded, so that what waits is counted
        self.unsent = 0  # characters of the events that wait for the writer
        self._ready = asyncio.Event()  # the writer has events to send
        self._empty = asyncio.Event()  # nothing waits for the writer
        self._empty.set()
        faults = config.faults
        self._direct = (faults.send_delay_s <= 0 and faults.drop_after_events is None
                        and faults.close_after_events is None and hasattr(connection, "paused"))
        self.sent = 0
        self.writes = 0  # socket writes made by put_all (a batch of events each)
        self._ended = False  # the writer stopped: nothing more will be written

    def put_all(self, events: list[dict[str, Any]]) -> None:
        if not events or self._ended:  # frames read before the close still come in: their answers go nowhere
            return
        if not self._queue and self._direct and self._write_now(events):
            return
        for ev in events:
            text = encode_event(ev)
            self._queue.append(text)
            self.unsent += len(text)
        self._ready.set()
        self._empty.clear()

    @property
    def behind(self) -> bool:
        """More than :data:`UNREAD_BYTES` of events wait for a client that does not read them: read no more of its
        frames until :meth:`room` says it caught up."""
        return self.unsent > UNREAD_BYTES

    def _write_now(self, events: list[dict[str, Any]]) -> bool:
        """Encode and write ``events`` in one socket write; False (nothing written) if the socket cannot take them now."""
        connection = self._connection
        protocol = connection.protocol
        if protocol.state is not State.OPEN or connection.paused:
            return False
        on_wire = self._config.on_wire
        for ev in events:
            text = encode_event(ev)
            protocol.send_text(text.encode())
            if on_wire is not None:
                on_wire("out", text)
        data = protocol.data_to_send()
        self.sent += len(events)
        self.writes += 1
        if all(data):
            connection.transport.write(b"".join(data))
        else:  # the end of the stream is among them: websockets' own writer half-closes
            connection.send_data()
        return True

    async def flush(self) -> None:
        """Return once every event handed over was written, or after the server's ``close_timeout_s``: a flush comes
        before a close, and a client that does not read would never take them."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._config.close_timeout_s):
                await self._empty.wait()

    async def room(self) -> None:
        """Return once nothing waits to be written and the socket takes more (at once, mostly)."""
        await self._empty.wait()
        if self._direct and self._connection.paused:
            await self._connection.drain()

    async def run(self) -> None:
        """Send until the connection closes or a fault ends it."""
        faults = self._config.faults
        try:
            while True:
                if not self._queue:
                    self._empty.set()
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                text = self._queue.popleft()
                if faults.send_delay_s > 0:
                    await self._config.clock.sleep(faults.send_delay_s)
                await self._connection.send(text)
                self.unsent -= len(text)
                if self._config.on_wire is not None:
                    self._config.on_wire("out", text)
                self.sent += 1
                if faults.drop_after_events is not None and self.sent >= faults.drop_after_events:
                    self._connection.transport.abort()
                    return
                if faults.close_after_events is not None and self.sent >= faults.close_after_events:
                    await self._connection.close(faults.close_code, "fault injected by the voxline local server")
                    return
        except ConnectionClosed:
            return
        finally:  # nothing more will be written: whoever waits for room or a flush goes on, to the session's end
            self._ended = True
            self._queue.clear()
            self.unsent = 0
            self._empty.set()


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
    wakeup = asyncio.Event()  # the pacer looks at the schedule again

    def heard(events: list[dict[str, Any]]) -> None:
        outbox.put_all(events)
        voicer.check()
        wakeup.set()

    voicer = SpeechSupplier(engine, synth, config.clock, wakeup.set,
                            lambda: outbox.put_all(failed(engine, "on a reply's speech")))
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


class _Armed:
    """When the pacer wakes by itself next: ``inf`` while it waits to be woken, ``-inf`` while it runs."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = -math.inf


async def _serve(connection: ServerConnection, engine: Engine, config: ServerConfig, outbox: Outbox,
                 wakeup: asyncio.Event, voicer: SpeechSupplier, hearer: HearingSupplier) -> None:
    armed = _Armed()
    async with asyncio.TaskGroup() as group:
        jobs = [
            group.create_task(outbox.run()),
            group.create_task(_pace(engine, outbox, config, wakeup, voicer, hearer, armed)),
            group.create_task(voicer.run()),
            group.create_task(hearer.run()),
            group.create_task(_expire(connection, engine, outbox, config)),
        ]
        try:
            await _read(connection, engine, outbox, config, wakeup, voicer, hearer, armed)
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
    armed: _Armed,
) -> None:
    """Client frames into the engine; what falls due is streamed by the pacer. The pacer is woken
    only when a frame brought the schedule forward: most frames are audio appends that change
    nothing it waits for."""
    clock = config.clock
    try:
        async for message in connection:
            if config.on_wire is not None:
                config.on_wire("in", wire_text(message))
            now = clock.now()
            try:
                outbox.put_all(engine.receive(message, now))
            except Exception:  # a bug of ours must not end the client's session: say so, as the service does
                outbox.put_all(failed(engine, "on a client frame"))
            if engine.closing is not None:  # the client ended it (a beta-only event): said, then closed as the service
                await outbox.flush()
                await connection.close(4000, close_reason(engine.closing))
                return
            voicer.check()
            hearer.check()
            due = engine.next_due()
            if due is not None and due < armed.at:
                wakeup.set()
            if outbox.behind:
                await outbox.room()
    except ConnectionClosed:
        return


def _short_of_audio(engine: Engine, now: float) -> bool:
    """The client's listener would have less than :data:`SHORT_OF_AUDIO_S` of a reply left: it streams on
    without waiting for a turn (a reply starting, or one the loop fell behind on), :data:`SHORT_RUN` steps a turn."""
    lead = engine.audio_lead(now)
    return lead is not None and lead < SHORT_OF_AUDIO_S


async def _pace(
    engine: Engine, outbox: Outbox, config: ServerConfig, wakeup: asyncio.Event, voicer: SpeechSupplier,
    hearer: HearingSupplier,
    armed: _Armed,
) -> None:
    clock = config.clock
    loop = asyncio.get_running_loop()
    real = isinstance(clock, RealClock)  # its time is the loop's: one timer sets the wake-up
    # streaming is bulk work: on a real clock each step takes its turn on the loop, so that many
    # sessions' replies never hold up the reading of a client's audio (its VAD, a barge-in)
    share = Slices(loop_share()) if real else None
    urgent = SHORT_RUN  # steps that may still go without a turn, while the client's listener is short of audio
    failed_at: float | None = None  # the step the engine failed on: not tried again while it is the one due
    while True:
        wakeup.clear()
        due = engine.next_due()
        if due is None or due == failed_at:
            armed.at = math.inf
            await wakeup.wait()
            armed.at = -math.inf
            continue
        delay = due - clock.now()
        if delay > 0:
            armed.at = due
            try:
                if real:
                    timer = loop.call_later(delay, wakeup.set)
                    try:
                        await wakeup.wait()
                    finally:
                        timer.cancel()
                else:
                    await first_of(clock.sleep(delay), wakeup.wait())
            finally:
                armed.at = -math.inf
            continue
        await outbox.room()  # what was written is on its way before the schedule goes on
        if share is not None:
            if urgent > 0 and _short_of_audio(engine, clock.now()):
                urgent -= 1
            else:
                await share.next()
                urgent = SHORT_RUN
        try:
            outbox.put_all(engine.poll(clock.now()))
        except Exception:  # as on a client frame: said, and the session goes on
            outbox.put_all(failed(engine, "on a scheduled step"))
            failed_at = due
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
