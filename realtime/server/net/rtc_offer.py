"""A WebRTC peer on the local server: the caller's SDP offer checked, answered, and the peer closed.

Both WebRTC endpoints use these: Realtime calls (``POST /v1/realtime/calls``,
:mod:`voxline.realtime.server.net.webrtc`) and Live sessions (``POST /v1/live/sessions``,
:mod:`voxline.realtime.server.live.rtc`).

- :func:`offer_text`: the offer as text, or ``ValueError`` naming what is wrong with it (codec
  lines are checked here, so an empty or truncated one is named rather than left to aiortc's parser,
  the DTLS fingerprint and role must be there, which aiortc would only miss once answered, and there
  are at most :data:`MAX_MEDIA_SECTIONS` media sections: aiortc's work for an offer grows with the
  square of their number, and a megabyte of them held the event loop for seconds; so it does with
  candidates and SSRC lines, bounded by :data:`MAX_LINES`).
- :func:`answer_offer`: apply the offer, add the output track if it has audio, answer (the caller's
  messages read as a browser reads them and capped at the size the answer advertises: ``dropped``
  hears of one dropped, :mod:`voxline.realtime.transports.rtc_reassembly`); a malformed
  offer, or one whose ``a=max-message-size`` no event could pass (negative, or under 16 KiB:
  :func:`~voxline.realtime.transports.rtc_sdp.max_message_problem`), closes the peer and is a
  :class:`RequestRejected` (``invalid_value``).
- :func:`close_peer`: close the peer connection, shielded. When the caller hangs up, aiortc starts
  closing the connection itself, and a second ``close()`` waits on that close's own future; the
  server cancelling the waiting call (shutting down) would cancel that future and leave aiortc's
  close failing (``InvalidStateError``), so the close runs on whatever happens to the caller.
- :func:`send_or_refuse`: an event on the call's channel, or the error saying it was too large; it
  runs in aiortc's callbacks, where an exception would end the peer's DTLS loop and leave the
  caller an open channel that never speaks, so it never raises. A caller that leaves more than
  :data:`~voxline.realtime.server.net.sideband.UNSENT_LIMIT` of events waiting on its channel is hung
  up on: SCTP gives the server no way to stop reading a peer that sends without reading (as a
  session's WebSocket does), so its answers would otherwise be held for it without end.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from aiortc import RTCDataChannel, RTCPeerConnection, RTCSessionDescription
from aiortc.exceptions import InvalidStateError
from aiortc.mediastreams import MediaStreamTrack

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.net import sideband
from voxline.realtime.transports.rtc_sdp import (SDP_FAILURES, connects_of, max_message_problem, peer_max_message,
                                                 reap_connects)
from voxline.realtime.transports.rtc_reassembly import Dropped, cap_incoming_messages
from voxline.realtime.transports.rtc_text import read_text_as_browsers_do

_log = logging.getLogger("voxline.server")

__all__ = ["ABANDONED_CLOSE_S", "MAX_LINES", "MAX_MEDIA_SECTIONS", "answer_offer", "close_abandoned", "close_peer",
           "offer_text"]

_RTPMAP = re.compile(r"a=rtpmap:(\d{1,3}) [A-Za-z0-9_.+-]+/\d{1,6}(?:/\d{1,2})?")
_FMTP = re.compile(r"a=fmtp:\d{1,3} \S.*")
_SHAPES = {
    "a=rtpmap:": (_RTPMAP, "a=rtpmap:<payload type> <encoding>/<clock rate>[/<channels>]"),
    "a=fmtp:": (_FMTP, "a=fmtp:<payload type> <parameters>"),
}

_DTLS = (("a=fingerprint:", "DTLS certificate fingerprint"), ("a=setup:", "DTLS role"))

MAX_MEDIA_SECTIONS = 16
"""The most ``m=`` sections an offer may have: a call needs an audio and a data section."""
MAX_LINES = {"a=candidate:": (64, "ICE candidates"), "a=ssrc:": (256, "SSRC attributes")}
"""The most lines of these an offer may have (a browser's has a handful): aiortc's and aioice's work grows with the
square of their number, and a thousand candidates held the event loop for a tenth of a second, four thousand for
nearly two. Each candidate is also an address the call's ICE checks are sent to."""


def offer_text(body: bytes) -> str:
    """The offer as text; ``ValueError`` unless it looks like SDP with at least one media section."""
    text = body.decode("utf-8")  # UnicodeDecodeError is a ValueError
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines[0].startswith("v=0") or not any(line.startswith("m=") for line in lines):
        raise ValueError("expected an SDP offer (v=0 … m=…)")
    if (sections := sum(line.startswith("m=") for line in lines)) > MAX_MEDIA_SECTIONS:
        raise ValueError(f"the offer has {sections} media sections (m=…); at most {MAX_MEDIA_SECTIONS} are taken")
    for prefix, (most, what) in MAX_LINES.items():
        if (count := sum(line.startswith(prefix) for line in lines)) > most:
            raise ValueError(f"the offer has {count} {what} ({prefix}…); at most {most} are taken")
    for number, line in enumerate(lines, 1):
        for prefix, (shape, spelled) in _SHAPES.items():
            if line.startswith(prefix):
                match = shape.fullmatch(line.rstrip())
                if match is None or (prefix == "a=rtpmap:" and int(match.group(1)) > 127):
                    raise ValueError(f"line {number} {line[:80]!r} is not {spelled!r}")
    for needed, what in _DTLS:  # without them no media can flow: aiortc took the offer, then failed in the background
        if not any(line.startswith(needed) for line in lines):
            raise ValueError(f"the offer has no {what} ({needed}…), which a WebRTC peer must send")
    return text


async def answer_offer(pc: RTCPeerConnection, offer: bytes | str, output: MediaStreamTrack, param: str | None,
                       dropped: Dropped) -> str:
    """Apply ``offer``, add ``output`` if the offer has audio, and return the SDP answer; ``dropped`` hears of a
    caller's message larger than the answer says this end takes (it is not read).

    A malformed offer closes ``pc`` and raises :class:`RequestRejected` naming ``param``.
    """
    connects: set[asyncio.Task[Any]] = set()  # those aiortc starts: they fail too if the offer is refused
    try:
        text = offer_text(offer) if isinstance(offer, bytes) else offer
        before = asyncio.all_tasks()
        await pc.setRemoteDescription(RTCSessionDescription(text, "offer"))
        connects |= connects_of(pc, asyncio.all_tasks() - before)
        if (problem := max_message_problem(peer_max_message(text))) is not None:  # read once aiortc took the SDP
            raise ValueError(problem)
        read_text_as_browsers_do(pc)  # a caller's malformed text message is answered, the call goes on
        cap_incoming_messages(pc, dropped)  # and so is one too large, without reading it whole
        if any(t.kind == "audio" for t in pc.getTransceivers()):
            pc.addTrack(output)
        answer = await pc.createAnswer()
        before = asyncio.all_tasks()
        await pc.setLocalDescription(answer)
        connects |= connects_of(pc, asyncio.all_tasks() - before)
    except SDP_FAILURES as exc:  # an offer aiortc cannot take (voxline.realtime.transports.rtc_sdp)
        reap_connects(connects)
        await close_peer(pc)
        detail = str(exc) if isinstance(exc, ValueError) and str(exc) else f"malformed SDP ({type(exc).__name__})"
        raise RequestRejected(errors.invalid_value(param, f"Invalid SDP offer: {detail}")) from None
    return str(pc.localDescription.sdp)


async def close_peer(pc: RTCPeerConnection) -> None:
    """Close ``pc``; cancelling the caller does not cancel the close (see the module docstring). A peer left half
    set up by an offer aiortc could not apply may fail to close (a transport it never made): that is logged."""
    try:
        await asyncio.shield(pc.close())
    except AttributeError as exc:  # aiortc's close reaches for a transport the refused offer never made
        _log.debug("closing a peer left half set up: %s", exc)


ABANDONED_CLOSE_S = 5.0
"""How long the close of a peer connection whose offer was given up on is waited for."""


async def close_abandoned(pc: RTCPeerConnection) -> None:
    """:func:`close_peer` for an offer given up on while it was answered (the request's deadline, the server closing):
    ``pc`` may be half set up, where aiortc's close can wait for a transport that never started, so it is waited for
    :data:`ABANDONED_CLOSE_S` at most (the close itself goes on)."""
    try:
        async with asyncio.timeout(ABANDONED_CLOSE_S):
            await close_peer(pc)
    except TimeoutError:
        _log.info("the peer connection of an offer given up on did not close within %g s", ABANDONED_CLOSE_S)


def send_or_refuse(channel: RTCDataChannel, text: str, kind: str, refusal: Callable[[ErrorSpec], str]) -> str | None:
    """Send ``text`` on ``channel``; an event larger than the peer takes (its ``a=max-message-size``: aiortc refuses
    it before anything is queued) goes as the ``event_too_large`` error ``refusal`` encodes instead, and the call
    goes on. What was sent; ``None`` when nothing could be: the channel had closed, or not even the error fitted, or
    the peer leaves more than :data:`~voxline.realtime.server.net.sideband.UNSENT_LIMIT` unread, and then the
    channel is closed (its ``close`` ends the call). Never raises (see the module docstring)."""
    try:
        channel.send(text)
    except InvalidStateError:  # closed meanwhile: the call is ending
        return None
    except ValueError as exc:
        sent = refusal(errors.event_not_delivered(kind, len(text.encode("utf-8")), str(exc)))
    else:
        return _unless_unread(channel, text)
    try:
        channel.send(sent)
    except InvalidStateError:
        return None
    except ValueError as exc:
        _log.warning("call ended: its data channel takes not even the error saying an event was too large (%s)", exc)
        channel.close()
        return None
    return _unless_unread(channel, sent)


def _unless_unread(channel: RTCDataChannel, sent: str) -> str | None:
    """``sent``, unless the peer has left more than the limit of events waiting on ``channel``: then the channel is
    closed, and ``None``."""
    if channel.bufferedAmount <= sideband.UNSENT_LIMIT:
        return sent
    _log.warning("call ended: its caller left more than %d bytes of events unread on its data channel",
                 sideband.UNSENT_LIMIT)
    channel.close()
    return None
