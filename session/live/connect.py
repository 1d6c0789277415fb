"""Which Live connection a session opens: a new session, a fork after a drop, a sideband, or WebRTC.

The driver's connect step calls :func:`open_live` for a GPT-Live session. After a drop the
machine has decided (:meth:`~.machine.LiveMachine.connection_lost`): a stored session is forked
(``/v1/live/sessions/{id}/fork``, its conversation goes on), anything else starts a new session
seeded with the text of what was heard. A fork the server refuses (the session still runs there: a
drop it has not noticed yet) starts such a new session at once. A session with ``call_id`` attaches to that running
Live session's sideband (``/attach``) and sends no ``session.start``.
"""

from __future__ import annotations

import functools
from typing import Any

from voxline.realtime.connection import RealtimeConnection, WireObserver
from voxline.realtime.errors import ConnectionFailed
from voxline.realtime.live.connection import connect_live, live_connection, live_http_url, post_live_offer

from ..keys import connection_key
from ..settings import SessionSettings
from .machine import LiveMachine

__all__ = ["open_live"]


async def open_live(settings: SessionSettings, machine: LiveMachine, *,
                    on_wire: WireObserver | None = None) -> RealtimeConnection:
    key = connection_key(settings)
    if settings.call_id is not None:
        return await connect_live(settings.url, key, attach=settings.call_id, on_wire=on_wire)
    if machine.fork_from is not None:
        try:
            return await _open(settings, machine, key, on_wire)
        except ConnectionFailed as failure:
            if not _fork_refused(failure):
                raise  # the network, the key, the server's own trouble: the next try forks again
            machine.fork_refused(failure.message)
    return await _open(settings, machine, key, on_wire)


def _fork_refused(failure: ConnectionFailed) -> bool:
    """The server answered the fork and said no (the session is still running there, as after a drop it has not
    noticed yet, or it is not stored or not final): forking again would be refused again."""
    return failure.status is not None and 400 <= failure.status < 500 and failure.status not in (401, 403, 408, 429)


async def _open(settings: SessionSettings, machine: LiveMachine, key: str,
                on_wire: WireObserver | None) -> RealtimeConnection:
    if settings.transport == "webrtc":
        from voxline.realtime.transports.webrtc import WebRTCTransport

        fork = machine.fork_from
        url = live_http_url(settings.url, session_id=fork, action="fork") if fork else live_http_url(settings.url)
        session = {} if fork else machine.session_config()
        audio = session.get("audio") or {}
        audio.pop("format", None)  # WebRTC negotiates its media format
        if not audio:
            session.pop("audio", None)
        offer = functools.partial(_offer, session=session)
        transport = await WebRTCTransport.connect(settings.url, key, url=url, offer=offer,
                                                  on_audio=machine.track_audio)  # the track is the output
        return live_connection(transport, started=True, on_wire=on_wire)  # the POST started the session
    return await connect_live(settings.url, key, fork_of=machine.fork_from, on_wire=on_wire)


async def _offer(url: str, token: str, sdp: str, timeout: float, *, session: dict[str, Any]) -> Any:
    return await post_live_offer(url, token, sdp, session, timeout=timeout)
