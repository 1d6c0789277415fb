"""Which Live connection a session opens: a new session, a fork after a drop, a sideband, or WebRTC.

The driver's connect step calls :func:`open_live` for a GPT-Live session. After a drop the
machine has decided (:meth:`~.machine.LiveMachine.connection_lost`): a stored session is forked
(``/v1/live/sessions/{id}/fork``, its conversation goes on), anything else starts a new session
seeded with the text of what was heard. A session with ``call_id`` attaches to that running
Live session's sideband (``/attach``) and sends no ``session.start``.
"""

from __future__ import annotations

import functools
from typing import Any

from voxline.realtime.connection import RealtimeConnection, WireObserver
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
    if settings.transport == "webrtc":
        from voxline.realtime.transports.webrtc import WebRTCTransport

        fork = machine.fork_from
        url = live_http_url(settings.url, session_id=fork, action="fork") if fork else live_http_url(settings.url)
        session = {} if fork else settings.live_session_config(machine.tool_schemas())
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
