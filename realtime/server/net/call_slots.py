"""How many WebRTC calls one local server runs at once (``ServerConfig.max_calls``, ``serve --max-calls``).

Every call holds a peer connection from its ``POST`` on, and its ICE agent a UDP socket per host address it
gathers (two on a host with one IPv4 and one IPv6 address), for up to the 15 s a caller has to connect even if
it never does. Unbounded, a burst of offers (a hundred a second) holds thousands of descriptors within that
window, and past the process's limit every accept and every socket fails: the WebSocket sessions running
die with the calls. So a place is taken before the peer connection is made and given back when the call ends
(or its offer is refused); an offer past the limit is answered ``503`` ``too_many_calls`` in the service's
error shape, and one line is logged at INFO. Realtime calls and GPT-Live WebRTC sessions share the places:
they hold the same descriptors.

The default, :func:`default_max_calls`, follows the process's descriptor limit (:func:`calls_for_descriptors`).
"""

from __future__ import annotations

import logging

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.http_api import error_body
from voxline.realtime.server.engine.http_message import HttpResponse

__all__ = ["CALL_DESCRIPTORS", "MAX_CALLS_CEILING", "CallSlots", "calls_for_descriptors", "default_max_calls"]

log = logging.getLogger("voxline.server")

CALL_DESCRIPTORS = 4
"""Descriptors counted for one call: one UDP socket per host address ICE gathers (2 on this project's hosts, one
IPv4 and one IPv6), with room for a host with four."""

MAX_CALLS_CEILING = 1024
"""The default's most, whatever the descriptor limit (often a million in containers): each call also holds an
engine, its buffers and aiortc's tasks, and one process does not serve that many calls in real time."""


def calls_for_descriptors(soft_limit: int | None) -> int:
    """The default number of calls for a soft ``RLIMIT_NOFILE`` of ``soft_limit`` (``None``: no limit): half the
    descriptors, at :data:`CALL_DESCRIPTORS` a call, so that calls alone never take more than half of them and the
    WebSocket sessions, the listening socket and files keep the rest; at least 1, at most :data:`MAX_CALLS_CEILING`."""
    if soft_limit is None:
        return MAX_CALLS_CEILING
    return max(1, min(MAX_CALLS_CEILING, soft_limit // 2 // CALL_DESCRIPTORS))


def default_max_calls() -> int:
    """:func:`calls_for_descriptors` of this process's soft descriptor limit (1024 descriptors: 128 calls)."""
    try:
        import resource
    except ImportError:  # no such limit to read (Windows)
        return calls_for_descriptors(None)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return calls_for_descriptors(None if soft == resource.RLIM_INFINITY else soft)


class CallSlots:
    """The places for calls: :meth:`take` one before making a peer connection, :meth:`give_back` it when the call
    is over (or was never started)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0

    def take(self) -> bool:
        """A place, if one is free (``False``: answer with :meth:`refusal`)."""
        if self.running >= self.limit:
            return False
        self.running += 1
        return True

    def give_back(self) -> None:
        self.running -= 1

    def refusal(self, what: str) -> HttpResponse:
        """``503`` ``too_many_calls`` for an offer of ``what`` (``"a WebRTC call"``…) made with every place taken,
        said in one line in the log."""
        log.info("refused %s: %d WebRTC calls are running, the most this server takes (max_calls)", what, self.limit)
        return HttpResponse(503, error_body(errors.too_many_calls(self.limit)))
