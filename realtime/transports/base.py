"""The transport interface, and an in-memory fake shipped with it.

A transport moves whole text frames (one JSON event each) and reports closure as
:class:`~voxline.realtime.errors.ConnectionClosed` with the close code and reason.
Its :attr:`~Transport.media` says how the microphone travels: ``None`` when audio goes
inside events (``input_audio_buffer.append``, WebSocket), or the :class:`MediaTrack`
that carries it (WebRTC).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..errors import ConnectionClosed

FrameTest = Callable[[bytes], bool]
"""A test of one frame's bytes (:class:`PeeksQueued`)."""

__all__ = ["Abortable", "FillsSilence", "FrameTest", "MediaTrack", "MemoryTransport", "PeeksQueued", "Pingable", "ReceivesNow", "SendsNow", "Transport", "memory_pair"]


class MediaTrack(Protocol):
    """An outgoing audio track: the microphone as media, not as events."""

    def push_audio(self, block: Any, *, age_s: float = 0.0) -> None:
        """Queue one block of int16 mono 24 kHz samples, whose last sample was captured ``age_s`` ago; never blocks."""

    @property
    def queued_audio_samples(self) -> int:
        """Samples pushed and not yet sent."""


@runtime_checkable
class FillsSilence(Protocol):
    """A :class:`MediaTrack` that says how much silence it sent for want of samples pushed in time (optional: a
    track without it is taken to send none). The peer counts that silence on its input timeline as if it was said."""

    def take_padding(self) -> int:
        """Samples of such silence sent since the last call."""


@runtime_checkable
class Transport(Protocol):
    """What :class:`~voxline.realtime.connection.RealtimeConnection` needs from a transport.

    A transport may also say ``server_time``: the server's wall clock when it connected (unix
    seconds, e.g. from the handshake's ``Date``), so a session can read ``expires_at`` on the
    server's clock rather than on a local one that may be skewed; and ``max_message_bytes``: the
    largest frame its peer takes, when smaller than an event may be (a WebRTC data channel's).
    """

    @property
    def media(self) -> MediaTrack | None:
        """The track that carries the microphone, or ``None`` when audio goes in events."""

    async def send(self, text: str) -> None:
        """Send one text frame; raises ConnectionClosed when closed."""

    async def recv(self) -> str:
        """Receive one text frame; raises ConnectionClosed when closed."""

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close with a code and reason; idempotent."""


@runtime_checkable
class Abortable(Protocol):
    """A transport that can drop its connection at once, without a close handshake (a WebSocket's socket)."""

    def abort(self) -> None:
        """Drop the connection now: a :meth:`Transport.recv` waiting raises ConnectionClosed at once."""


class Pingable(Protocol):
    """A transport that can ask the peer whether it is still there (WebSocket ping/pong)."""

    async def ping(self) -> None:
        """Return once the peer answered; raises ConnectionClosed when closed."""


class SendsNow(Protocol):
    """A transport that can often write a frame without waiting (a WebSocket whose buffer has room)."""

    def try_send(self, text: str) -> bool:
        """Write one text frame now if that needs no waiting; False (nothing written) if :meth:`Transport.send`
        must; raises ConnectionClosed when closed."""


class ReceivesNow(Protocol):
    """A transport that can often hand over a frame already read, without waiting (a WebSocket's frames of one read)."""

    def try_recv(self) -> str | None:
        """The next text frame if it is whole already, else None (then :meth:`Transport.recv` waits for it)."""


@runtime_checkable
class PeeksQueued(Protocol):
    """A transport that can look at the frames it read and not yet handed over (a WebSocket's queue).

    ``matches`` is asked only of frames of at most ``max_bytes``; it gets the frame's bytes and must
    not raise.
    """

    def queued_where(self, matches: FrameTest, max_bytes: int, max_frames: int) -> int | None:
        """How many frames wait ahead of the first of the next ``max_frames`` that ``matches``, or None."""

    def watch_for(self, matches: FrameTest, max_bytes: int, seen: Callable[[], None]) -> None:
        """Call ``seen`` as each matching frame is read (from the read callback; it must not block)."""


_CLOSE = object()


class MemoryTransport:
    """One end of an in-memory frame pipe with bounded queues (see :func:`memory_pair`)."""

    media = None

    def __init__(
        self,
        inbox: asyncio.Queue[object],
        outbox: asyncio.Queue[object],
        inbox_room: asyncio.Semaphore,
        outbox_room: asyncio.Semaphore,
    ) -> None:
        self._inbox, self._outbox = inbox, outbox
        self._inbox_room, self._outbox_room = inbox_room, outbox_room
        self._peer: MemoryTransport | None = None
        self._unread: deque[str] = deque()  # the inbox's frames, to look at (PeeksQueued)
        self._watch: tuple[FrameTest, int, Callable[[], None]] | None = None
        self.close_code: int | None = None
        self.close_reason = ""

    def __repr__(self) -> str:
        state = "open" if self.close_code is None else f"closed {self.close_code}"
        return f"<MemoryTransport {state}>"

    async def send(self, text: str) -> None:
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, self.close_reason)
        await self._outbox_room.acquire()  # back-pressure: at most max_queue frames in flight
        self._outbox.put_nowait(text)
        if self._peer is not None:
            self._peer._arrived(text)

    async def recv(self) -> str:
        if self.close_code is not None and self._inbox.empty():
            raise ConnectionClosed(self.close_code, self.close_reason)
        item = await self._inbox.get()
        if item is _CLOSE:
            self._inbox.put_nowait(_CLOSE)  # later recv() calls see the close too
            raise ConnectionClosed(self.close_code, self.close_reason)
        assert isinstance(item, str)
        self._inbox_room.release()
        if self._unread:
            self._unread.popleft()
        return item

    def queued_where(self, matches: FrameTest, max_bytes: int, max_frames: int) -> int | None:
        """How many frames wait ahead of the first of the next ``max_frames`` sent here, of at most
        ``max_bytes`` (UTF-8), that ``matches``; None if none does."""
        for ahead, frame in enumerate(itertools.islice(self._unread, max_frames)):
            data = frame.encode()
            if len(data) <= max_bytes and matches(data):
                return ahead
        return None

    def watch_for(self, matches: FrameTest, max_bytes: int, seen: Callable[[], None]) -> None:
        """Call ``seen`` whenever such a frame is sent here (before it is received)."""
        self._watch = (matches, max_bytes, seen)

    def _arrived(self, text: str) -> None:
        self._unread.append(text)
        if self._watch is not None:
            matches, max_bytes, seen = self._watch
            data = text.encode()
            if len(data) <= max_bytes and matches(data):
                seen()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.close_code is not None:
            return
        self.close_code, self.close_reason = code, reason
        self._inbox.put_nowait(_CLOSE)
        if self._peer is not None and self._peer.close_code is None:
            self._peer.close_code, self._peer.close_reason = code, reason
            self._peer._inbox.put_nowait(_CLOSE)


def memory_pair(max_queue: int = 256) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected transports; closing either closes both with the same code and reason.

    At most ``max_queue`` frames wait in each direction; a sender beyond that waits.
    """
    a_to_b: asyncio.Queue[object] = asyncio.Queue()
    b_to_a: asyncio.Queue[object] = asyncio.Queue()
    room_ab, room_ba = asyncio.Semaphore(max_queue), asyncio.Semaphore(max_queue)
    a = MemoryTransport(inbox=b_to_a, outbox=a_to_b, inbox_room=room_ba, outbox_room=room_ab)
    b = MemoryTransport(inbox=a_to_b, outbox=b_to_a, inbox_room=room_ab, outbox_room=room_ba)
    a._peer, b._peer = b, a
    return a, b
