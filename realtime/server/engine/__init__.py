"""The local server's sans-I/O side: everything that does no I/O and awaits nothing.

:class:`~voxline.realtime.server.engine.core.Engine` takes client frames and a time and
returns server events (plain dicts); its parts are the conversation, responses, the
planner, turns, the session config and its schemas, validation, errors and ids. Beside
it are the sans-I/O halves of the transports (a WebRTC call's bridge and output buffer,
HTTP requests and credentials) and the speech the engine reads (a voice cache, and the
synchronous side that fills it). Nothing here imports asyncio, sockets, websockets or
aiortc (``tests/test_server_layout.py`` checks it); the network side is
:mod:`voxline.realtime.server.net`.
"""

from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.state import EngineConfig

__all__ = ["Engine", "EngineConfig"]
