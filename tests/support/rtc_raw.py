"""Data-channel messages no browser could send: text that is not UTF-8, put on the wire as it is."""

from __future__ import annotations

from typing import Any

from aiortc import RTCDataChannel

__all__ = ["send_raw_text"]

_TEXT = 51  # SCTP payload protocol identifier of a WebRTC string message


async def send_raw_text(channel: RTCDataChannel, data: bytes) -> None:
    """Send ``data`` on ``channel`` as a text message, byte for byte (aiortc's own send encodes a str)."""
    sctp: Any = channel.transport
    sctp._data_channel_queue.append((channel, _TEXT, data))
    await sctp._data_channel_flush()
