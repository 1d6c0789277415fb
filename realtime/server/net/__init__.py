"""The local server's network side: the event loop, sockets and processes around the engine.

The HTTP/WebSocket app and its connections, WebSocket sessions, WebRTC calls and their
sideband sockets, the in-process transport (the engine behind the client's transport
interface, for lockstep runs), ``voxline serve`` and its worker processes. Each drives a
sans-I/O :class:`~voxline.realtime.server.engine.core.Engine`
(:mod:`voxline.realtime.server.engine`).
"""
