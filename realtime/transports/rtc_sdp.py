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

A peer's ``a=max-message-size`` is read once for both ends (:func:`peer_max_message`), and judged
once (:func:`max_message_problem`): a negative size, or one under the 16 KiB every WebRTC stack
takes, leaves a channel that cannot carry a session's events, so the offer or answer saying it is
refused before any call is made of it.

An answer is also refused when it leaves the call without its audio or its events
(:func:`answer_problem`): a section rejected (port 0), or audio the server would not send or would not take.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.exceptions import InvalidAccessError, InvalidStateError, OperationError
from aiortc.sdp import SessionDescription

__all__ = ["DEFAULT_MAX_MESSAGE", "LEAST_MAX_MESSAGE", "SDP_FAILURES", "answer_problem", "connects_of",
           "max_message_problem", "peer_max_message", "reap_connects"]

_log = logging.getLogger("voxline.realtime")

DEFAULT_MAX_MESSAGE = 65_536
"""The largest data channel message a peer takes when its SDP does not say (RFC 8841)."""

LEAST_MAX_MESSAGE = 16_384
"""The smallest ``a=max-message-size`` either end accepts: 16 KiB is the size every WebRTC data channel
implementation takes (RFC 8831 §6.6); below it even a session's opening events, or the error saying one was too
large, may not fit, and the channel would open and never speak."""

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


def peer_max_message(sdp: str) -> int | None:
    """The largest data channel message the peer of an SDP takes, read as aiortc reads it (it enforces it): its
    data section's last ``a=max-message-size``, 64 KiB without one, no limit for 0. ``sdp`` parsed already."""
    for media in SessionDescription.parse(sdp).media:
        if media.kind == "application":
            caps = media.sctpCapabilities
            size = caps.maxMessageSize if caps is not None else DEFAULT_MAX_MESSAGE
            return size or None
    return DEFAULT_MAX_MESSAGE


def max_message_problem(size: int | None) -> str | None:
    """What makes a peer's largest message (:func:`peer_max_message`) unusable, or ``None`` if it is usable."""
    if size is None:
        return None
    if size < 0:
        return f"a=max-message-size {size} is negative"
    if size < LEAST_MAX_MESSAGE:
        return f"a=max-message-size {size} is under the {LEAST_MAX_MESSAGE} bytes every WebRTC peer takes"
    return None


_DIRECTIONS = ("sendrecv", "sendonly", "recvonly", "inactive")
_UNUSABLE: dict[str | None, str] = {  # the answer's audio direction (the server's side): what it leaves of a call
    "recvonly": "a=recvonly for the audio: the server would never send its voice",
    "sendonly": "a=sendonly for the audio: the server would never take the microphone",
    "inactive": "a=inactive for the audio: no audio would flow either way",
    None: "no direction for the audio: aiortc would then neither send nor receive it",
}


def answer_problem(sdp: str) -> str | None:
    """What makes an answer to this end's offer (audio ``sendrecv`` and the events' data channel) unusable for a
    voice call, or ``None``: a section missing or rejected (port 0, unless ``a=bundle-only`` says it rides on
    another's transport), or an audio direction other than ``sendrecv``, which is the server's side of it, read
    as aiortc reads it (the section's last direction line; with none, aiortc neither sends nor receives). Never
    raises: a malformed answer is left for aiortc's parser to refuse."""
    sections: dict[str, tuple[str, list[str]]] = {}  # the first section of each kind: its port and lines
    lines: list[str] = []
    for line in sdp.splitlines():
        if line.startswith("m="):
            kind, _, rest = line[2:].partition(" ")
            lines = []
            sections.setdefault(kind, (rest.split(" ", 1)[0], lines))
        else:
            lines.append(line)
    for kind, what in (("audio", "the audio"), ("application", "the events' data channel")):
        if kind not in sections:
            return f"no m={kind} section: it leaves out {what}"
        port, attributes = sections[kind]
        if port.isascii() and port.isdigit() and int(port) == 0 and "a=bundle-only" not in attributes:
            return f"port 0 for {what}: the server rejects it"
    named = [line[2:].partition(":")[0] for line in sections["audio"][1] if line.startswith("a=")]
    direction = next((name for name in reversed(named) if name in _DIRECTIONS), None)
    return None if direction == "sendrecv" else _UNUSABLE[direction]
