"""The connection a session opens by default: what its settings and machine call for.

- GPT-Live (a :class:`~.live.machine.LiveMachine`): a new session, a fork, a sideband or
  WebRTC, as :func:`~.live.connect.open_live` decides;
- Realtime with a track tagger: a WebRTC call whose audio track feeds the tagger;
- Realtime with ``call_id``: the call's sideband over WebSocket, with the API key and no model;
- otherwise a WebSocket to ``settings.url`` for ``settings.model``.

A session given its own ``connector`` never comes here.
"""

from __future__ import annotations

from voxline.realtime.connection import RealtimeConnection, WireObserver, connect

from .keys import connection_key
from .live.connect import open_live
from .live.machine import LiveMachine
from .machines import Machine
from .settings import SessionSettings

__all__ = ["dial"]


async def dial(settings: SessionSettings, machine: Machine, on_wire: WireObserver | None) -> RealtimeConnection:
    """A new connection for ``machine`` as ``settings`` describe it (see the module docstring)."""
    if isinstance(machine, LiveMachine):
        return await open_live(settings, machine, on_wire=on_wire)
    key = connection_key(settings)
    if machine.track is not None:
        from voxline.realtime.transports.webrtc import WebRTCTransport  # aiortc loads only for a WebRTC session

        transport = await WebRTCTransport.connect(settings.url, key, model=settings.model,
                                                  on_audio=machine.track.on_audio)
        return RealtimeConnection(transport, on_wire=on_wire)
    if settings.call_id is not None:
        return await connect(settings.url, key, model=None, call_id=settings.call_id, on_wire=on_wire)
    return await connect(settings.url, key, model=settings.model, on_wire=on_wire)
