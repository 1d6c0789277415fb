"""Incoming data-channel messages reassembled in linear time and capped at the size this end advertises.

aiortc reassembles a message's SCTP fragments by scanning every fragment it holds each time one
more arrives, so the work for one message grows with the square of its size; and it takes a
message of any size, whatever its own ``a=max-message-size`` told the peer. A peer sending one
20 MB message held the event loop for half a minute. :func:`cap_incoming_messages` gives a peer
connection's SCTP transport inbound streams that look for a whole message only when a fragment
may have completed one (the last of a message, one that filled a gap, a sequence moved on), and
that stop reassembling a message once it holds more than this end's advertised maximum: its
fragments are let go (their room handed back to the receive window), the ones still to come are
dropped as they arrive, the stream moves on to the next message, and ``dropped`` is told once.
The work for any message is then bounded by the cap. Fragments are never given to aiortc's
receive path past the cap, so what reaches the application is at most what this end said it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.rtcsctptransport import (
    SCTP_DATA_FIRST_FRAG,
    SCTP_DATA_LAST_FRAG,
    SCTP_DATA_UNORDERED,
    DataChunk,
    InboundStream,
    RTCSctpTransport,
)
from aiortc.utils import uint16_add, uint16_gt, uint32_gt

__all__ = ["CappedStream", "Dropped", "cap_incoming_messages"]

Dropped = Callable[[int, int], None]
"""Told of a message dropped for its size: the stream it came on (its channel's id) and the most this end takes."""

_UNORDERED = -1  # the key of an unordered stream's fragments: their sequence numbers mean nothing


def cap_incoming_messages(pc: RTCPeerConnection, dropped: Dropped) -> bool:
    """Cap the messages ``pc`` takes at its own advertised ``a=max-message-size`` (its SCTP transport once made:
    after ``createDataChannel``, or after an offer with a data channel is applied). Returns whether it could:
    ``False`` before the transport exists, or where aiortc's receive path is not the one known here."""
    if not isinstance(pc.sctp, RTCSctpTransport):
        return False
    sctp: Any = pc.sctp  # its private receive path, patched
    streams = getattr(sctp, "_inbound_streams", None)
    if not isinstance(streams, dict) or not callable(getattr(sctp, "_get_inbound_stream", None)):
        return False
    if getattr(sctp._get_inbound_stream, "caps_messages", False):
        return True
    limit = RTCSctpTransport.getCapabilities().maxMessageSize

    def credit(size: int) -> None:  # fragments let go: the peer may fill their room again
        sctp._advertised_rwnd += size

    def inbound(stream_id: int) -> InboundStream:
        stream = streams.get(stream_id)
        if stream is None:
            stream = streams[stream_id] = CappedStream(limit, credit, lambda: dropped(stream_id, limit))
        return stream

    inbound.caps_messages = True  # type: ignore[attr-defined]
    sctp._get_inbound_stream = inbound
    return True


class CappedStream(InboundStream):
    """An inbound stream that drops a message past ``limit`` bytes and scans for whole messages only when one may
    be whole."""

    def __init__(self, limit: int, credit: Callable[[int], None], dropped: Callable[[], None]) -> None:
        super().__init__()
        self._limit = limit
        self._credit = credit
        self._dropped = dropped
        self._held: dict[int, int] = {}  # bytes held per ordered message (its sequence number), or _UNORDERED
        self._skipping: set[int] = set()  # ordered messages dropped, their sequence numbers not reached yet
        self._skip_unordered = False  # an unordered message was dropped: its later fragments go too
        self._may_complete = False
        self._sequence_seen = 0

    def add_chunk(self, chunk: DataChunk) -> None:
        key = _key(chunk)
        if self._stale(chunk, key):
            self._credit(len(chunk.user_data))
            return
        at_end = not self.reassembly or uint32_gt(chunk.tsn, self.reassembly[-1].tsn)
        super().add_chunk(chunk)
        # appended after all held, and not a last fragment: it completes no message, so no scan for one
        self._may_complete |= not at_end or bool(chunk.flags & SCTP_DATA_LAST_FRAG)
        self._held[key] = self._held.get(key, 0) + len(chunk.user_data)
        if self._held[key] > self._limit:
            self._drop(key)

    def pop_messages(self) -> Iterator[tuple[int, int, bytes]]:
        if not self._may_complete and self.sequence_number == self._sequence_seen:
            return
        self._may_complete = False
        held = len(self.reassembly)
        while True:
            yield from super().pop_messages()
            if self.sequence_number not in self._skipping:
                break
            self._skipping.discard(self.sequence_number)  # a dropped message's turn: the next one's
            self.sequence_number = uint16_add(self.sequence_number, 1)
        self._sequence_seen = self.sequence_number
        # a FORWARD-TSN moves the stream past messages directly (partial reliability): a dropped one it passed is
        # forgotten, or 65,536 messages on, the good message that takes its number would be dropped for it
        self._skipping = {key for key in self._skipping if not uint16_gt(self.sequence_number, key)}
        if len(self.reassembly) != held:
            self._count()

    def prune_chunks(self, tsn: int) -> int:
        pruned = super().prune_chunks(tsn)
        if pruned:
            self._count()
        return pruned

    def _stale(self, chunk: DataChunk, key: int) -> bool:
        """A fragment of a message dropped (or, ordered, of one already passed)."""
        if key == _UNORDERED:
            if self._skip_unordered and not chunk.flags & SCTP_DATA_FIRST_FRAG:
                return True
            self._skip_unordered = False
            return False
        return key in self._skipping or uint16_gt(self.sequence_number, key)

    def _drop(self, key: int) -> None:
        size = sum(len(c.user_data) for c in self.reassembly if _key(c) == key)
        self.reassembly = [c for c in self.reassembly if _key(c) != key]
        del self._held[key]
        if key == _UNORDERED:
            self._skip_unordered = True
        else:
            self._skipping.add(key)
            self._may_complete = True  # its turn may have come: the stream moves past it
        self._credit(size)
        self._dropped()

    def _count(self) -> None:
        self._held = {}
        for chunk in self.reassembly:
            key = _key(chunk)
            self._held[key] = self._held.get(key, 0) + len(chunk.user_data)


def _key(chunk: DataChunk) -> int:
    return _UNORDERED if chunk.flags & SCTP_DATA_UNORDERED else chunk.stream_seq
