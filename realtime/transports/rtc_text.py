"""Data-channel text read as a browser reads it: bytes that are not UTF-8 become U+FFFD.

A data channel's text message (SCTP payload protocol 51) is UTF-8 by definition, and a browser
decodes it with replacement: a stray byte is a U+FFFD in the string handed to the page. aiortc
decodes strictly inside its SCTP receive path, so one malformed message raised there and closed
the whole peer connection: a client lost its session, a server its caller, over one frame.
:func:`read_text_as_browsers_do` makes a peer connection's data channels decode text with
replacement; the JSON layer above then answers the frame as it answers any malformed one (a typed
error), and the connection goes on. Binary messages and the channel protocol are untouched.
"""

from __future__ import annotations

from typing import Any

from aiortc import RTCPeerConnection

__all__ = ["read_text_as_browsers_do"]

_TEXT = 51  # SCTP payload protocol identifier of a WebRTC string message (RFC 8831 section 8)


def read_text_as_browsers_do(pc: RTCPeerConnection) -> bool:
    """Have the data channels of ``pc`` (its SCTP transport once made: after ``createDataChannel``, or after
    an offer with a data channel is applied) decode text messages with replacement. Returns whether it
    could: ``False`` before the transport exists, or where aiortc's receive path is not the one known here."""
    sctp: Any = pc.sctp
    receive = getattr(sctp, "_data_channel_receive", None)
    channels = getattr(sctp, "_data_channels", None)
    if receive is None or not isinstance(channels, dict):
        return False
    if getattr(receive, "reads_text_as_browsers_do", False):
        return True

    async def read(stream_id: int, pp_id: int, data: bytes) -> None:
        if pp_id != _TEXT:
            await receive(stream_id, pp_id, data)
            return
        channel = channels.get(stream_id)
        if channel is not None:
            channel.emit("message", data.decode("utf-8", "replace"))

    read.reads_text_as_browsers_do = True  # type: ignore[attr-defined]
    sctp._data_channel_receive = read
    return True
