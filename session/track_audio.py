"""WebRTC: tag the assistant audio arriving on the remote track with the item it belongs to.

Over WebRTC the audio comes as a media track, not as ``response.output_audio.delta``
events, and the server owns the output buffer (PROTOCOL.md §5). The data channel says when
the server starts and stops playing a response (``output_audio_buffer.started`` /
``.stopped`` / ``.cleared``); :class:`TrackTagger` uses that to queue track audio into the
playout under the response's first assistant message item, so the heard ledger, the
session's state and its barge-in reports work as they do over WebSocket.

``.stopped`` can arrive before the last frames, which sit in the network jitter buffer:
audio keeps being tagged for a grace of ``grace_ms`` of samples after it. The cut itself
is the server's (it truncates at what it played); a reply with several audio items is
attributed to its first. Counting is in samples; nothing reads a clock.
"""

from __future__ import annotations

import numpy as np

from voxline.base.audio_format import SAMPLE_RATE as RATE
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.protocol import ProtocolOutput

__all__ = ["TrackTagger"]

_RESPONSES = 16  # responses whose first message item is remembered


class TrackTagger:
    """Feeds remote-track audio into a playout buffer, tagged by the server's playback state."""

    def __init__(self, playout: PlayoutBuffer, *, grace_ms: float = 300.0) -> None:
        self.playout = playout
        self._grace = int(grace_ms * RATE / 1000)
        self._items: dict[str, str] = {}  # response id → its first assistant message item
        self._current: str | None = None
        self._left: int | None = None  # samples still tagged after .stopped (None: playing)
        self.server_playing = False

    @property
    def audible(self) -> bool:
        """True while track audio is being attributed to an item."""
        return self._current is not None

    def handle(self, output: ProtocolOutput) -> None:
        match output:
            case ev.ResponseOutputItemAdded() if getattr(output.item, "type", None) == "message":
                self._items.setdefault(output.response_id, output.item.id)
                while len(self._items) > _RESPONSES:  # only recent responses can still start playing
                    del self._items[next(iter(self._items))]
            case ev.OutputAudioBufferStarted():
                self._current = self._items.get(output.response_id, output.response_id)
                self._left = None
                self.server_playing = True
            case ev.OutputAudioBufferStopped():
                self._left = self._grace
                self.server_playing = False
            case ev.OutputAudioBufferCleared():
                self._finish()
                self.server_playing = False
            case _:
                pass

    def on_audio(self, block: np.ndarray) -> None:
        """The remote track's callback: int16 mono 24 kHz blocks."""
        if self._current is None:
            return
        self.playout.enqueue(block, self._current, 0)
        if self._left is not None:
            self._left -= len(block)
            if self._left <= 0:
                self._finish()

    def _finish(self) -> None:
        if self._current is not None:
            self.playout.mark_complete(self._current, 0)
        self._current, self._left = None, None
