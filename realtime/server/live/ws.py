"""Live over WebSocket: the primary session socket, and a sideband attached to a running session.

The primary socket (``/v1/live/sessions``, or ``/v1/live/sessions/{id}/fork``) runs one
:class:`~voxline.realtime.server.live.engine.LiveEngine`: each frame read is handed to it and
what it returns is routed (:meth:`LiveSession.route`); a writer sends in order (the Realtime
server's :class:`~voxline.realtime.server.net.ws_session.Outbox`, with its fault injection; while more than
:data:`~voxline.realtime.server.net.ws_session.UNREAD_BYTES` of events wait unread, no more frames are read), a
voicer synthesizes replies that need it off the loop, a timer closes the session at its
length limit with ``expired``. How it ends decides the close reason the sidebands (and a
stored session) get: ``session.close`` → ``close_requested``; the client's close frame →
``remote_hangup``; a connection gone without one → ``connection_lost``. After
``session.closed`` the server closes the socket with 1000.

A sideband (``/v1/live/sessions/{id}/attach``, the API key) gets ``session.started`` with the
session as it is now, then every event of the session, the caller's audio reflected
(``session.input_audio.append``) and the output audio with its timeline position; it may send
the commands a sideband may (no audio, no start). It is closed with 1000 when the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.live.engine import CloseReason, LiveEngine, Out
from voxline.realtime.server.live.hub import LiveHub, LiveSession
from voxline.realtime.server.net.config import ServerConfig, wire_text
from voxline.realtime.server.net.sideband import Sideband
from voxline.realtime.server.net.hearer import failed
from voxline.realtime.server.net.voicer import SpeechSupplier
from voxline.realtime.server.net.ws_session import Outbox

__all__ = ["attach_sideband", "run_live_socket"]

log = logging.getLogger("voxline.server")


async def run_live_socket(
    connection: ServerConnection, engine: LiveEngine, hub: LiveHub, config: ServerConfig, synth: Synth
) -> None:
    """Serve one primary Live WebSocket until the session or the connection ends."""
    outbox = Outbox(connection, config)
    closing = asyncio.Event()
    session = LiveSession(engine, outbox.put_all, on_wire=config.on_wire, on_closed=closing.set)
    hub.add(session)
    voicer = SpeechSupplier(engine, synth, config.clock, lambda: None,
                            lambda: session.route(failed(engine, "on a reply's speech")))
    started = config.clock.now()
    try:
        async with asyncio.TaskGroup() as group:
            jobs = [
                group.create_task(outbox.run()),
                group.create_task(voicer.run()),
                group.create_task(_expire(session, config)),
                group.create_task(_close_when(closing, connection, outbox)),
            ]
            try:
                await _read(connection, session, outbox, config, voicer)
            finally:
                for job in jobs:
                    job.cancel()
    finally:
        session.close_observers()
        hub.ended(session)
        log.info("Live session %s ended (%s) after %.1f s", engine.session_id, engine.closed or "not started",
                 config.clock.now() - started)


async def _read(
    connection: ServerConnection, session: LiveSession, outbox: Outbox, config: ServerConfig, voicer: SpeechSupplier
) -> None:
    engine = session.engine
    try:
        async for message in connection:
            if config.on_wire is not None:
                config.on_wire("in", wire_text(message))
            session.route(_handle(engine, lambda: engine.receive(message, "primary")))
            voicer.check()
            if outbox.behind:  # a client that sends without reading: its frames wait until it catches up
                await outbox.room()
    except ConnectionClosed:
        pass
    if engine.closed is None:
        session.route(engine.close(_reason(connection)))


def _handle(engine: LiveEngine, step: Callable[[], list[Out]]) -> list[Out]:
    try:
        return step()
    except Exception:  # a bug of ours must not end the client's session: say so, as the service does
        log.exception("the Live engine failed on a client frame")
        return [engine.error(errors.server_error())]


def _reason(connection: ServerConnection) -> CloseReason:
    """A close frame from the client is a hang-up; a connection gone without one is lost."""
    received = connection.protocol.close_rcvd
    return "remote_hangup" if received is not None and received.code in (1000, 1001) else "connection_lost"


async def _close_when(closing: asyncio.Event, connection: ServerConnection, outbox: Outbox) -> None:
    """Once the session has closed: send what is queued (``session.closed`` last), then close with 1000."""
    await closing.wait()
    await outbox.flush()  # within the server's close_timeout_s
    with contextlib.suppress(ConnectionClosed):
        await connection.close(1000, "session closed")


async def _expire(session: LiveSession, config: ServerConfig) -> None:
    await config.clock.sleep(session.engine.config.max_session_s)
    session.route(session.engine.close("expired"))
    if not session.finished:  # it never started: nothing to tell, just end it
        session.finished = True
        if session.on_closed is not None:
            session.on_closed()


async def attach_sideband(connection: ServerConnection, session: LiveSession, config: ServerConfig) -> None:
    """Serve one sideband on a running session until it or the session closes."""
    sideband = Sideband(connection)
    engine = session.engine
    session.attach(sideband)
    if engine.started:
        session.tell(sideband, [engine.snapshot()])
    if session.finished:  # it closed while this socket was being admitted
        session.detach(sideband)
        sideband.close()

    def on_frame(message: str | bytes) -> None:
        if config.on_wire is not None:
            config.on_wire("in", wire_text(message))
        session.route(_handle(engine, lambda: engine.receive(message, "sideband")), origin=sideband)

    try:
        await sideband.run(on_frame)
    finally:
        session.detach(sideband)
