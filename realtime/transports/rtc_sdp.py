"""What aiortc raises for a session description (an offer or an answer) it cannot apply, and the connect tasks
it leaves behind when a peer is given up on.

aiortc checks little of the SDP it is given: its parser asserts, indexes and unpacks unchecked on
malformed lines, and applying lines that refer to what is not there fails further in (a BUNDLE
naming no m-line's mid leaves a transport unset; a format line for a payload type the m-line does
not list ends a codec search with StopIteration, which leaves the coroutine as a RuntimeError; a
video section without a codec it knows fails as OperationError). Both ends catch
:data:`SDP_FAILURES` around applying a description and report it as the peer's bad SDP.

Applying a description starts a connect task aiortc keeps no handle on; a peer closed before it
connected (a refused offer, a caller that gave up mid-connect) makes it fail with no one to hear
it, and asyncio says "Task exception was never retrieved". :func:`connects_of` finds those tasks
right after a description is applied; :func:`reap_connects` hears them once the peer is given up on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.exceptions import InvalidAccessError, InvalidStateError, OperationError

__all__ = ["SDP_FAILURES", "connects_of", "reap_connects"]

_log = logging.getLogger("voxline.realtime")

SDP_FAILURES = (ValueError, AssertionError, IndexError, KeyError, TypeError, AttributeError, RuntimeError,
                InvalidAccessError, InvalidStateError, OperationError)


def connects_of(pc: RTCPeerConnection, tasks: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """``pc``'s connect tasks among ``tasks``: take the tasks made by a ``setLocalDescription`` or
    ``setRemoteDescription`` of ``pc``'s right after it returns, while its connect task has not run yet (its
    coroutine then runs a method of ``pc``'s: another peer's, made in the same while, is not taken)."""
    found = set()
    for task in tasks:
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        if getattr(coro, "__qualname__", "").startswith("RTCPeerConnection.") and frame is not None \
                and frame.f_locals.get("self") is pc:
            found.add(task)
    return found


def reap_connects(tasks: set[asyncio.Task[Any]]) -> None:
    """The connect tasks of a peer given up on (:func:`connects_of`) end with their error logged at DEBUG."""
    for task in tasks:
        task.add_done_callback(_connect_ended)


def _connect_ended(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        _log.debug("a connect of a peer given up on ended: %r", exc)
