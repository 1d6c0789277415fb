"""The caller's audio to a GPT-Live session: microphone blocks into chunks the connection carries (sans-I/O).

The same :class:`~voxline.session.machine.microphone.MicrophonePath` as a Realtime session's, with
no padding and nothing journaled: nothing of the input is resent on a new Live session. Each
chunk sent is placed on the session timeline where its audio was captured
(:meth:`~.metrics.LiveMetrics.input_sent`); over WebRTC the media track carries the blocks, and
they are only counted. Push-to-talk has no commit on Live: a released turn's last chunk goes, then
the model's input is muted (the model decides when to answer).
"""

from __future__ import annotations

import numpy as np

from ..capture import CapturePath
from ..machine.microphone import MicrophonePath
from ..settings import SessionSettings
from .carrier import LiveCarrier
from .metrics import LiveMetrics

__all__ = ["LiveInputAudio"]


class LiveInputAudio:
    """The microphone path and what of it went to the session (see the module docstring)."""

    def __init__(self, settings: SessionSettings, capture: CapturePath | None, carrier: LiveCarrier,
                 metrics: LiveMetrics, rate: int) -> None:
        self.mic = MicrophonePath(padding_ms=0, chunk_samples=settings.input_chunk_samples, capture=capture,
                                  push_to_talk=settings.turn_detection == "none", journaled=False)
        self.carrier = carrier
        self.metrics = metrics
        self.rate = rate  # the session timeline's
        self._captured_at: float | None = None  # the capture time of the last block kept for the session

    def send(self, pcm: np.ndarray, end: float, *, media: bool, padded: int) -> tuple[np.ndarray | None, bool]:
        """A cleaned block whose last sample was captured at ``end``: for a media track, the block to send (its
        ``padded`` filler counted as input too), else whether a chunk was appended."""
        if self.carrier.current is None or not self.carrier.carrying:
            return None, False
        pcm = np.ascontiguousarray(pcm, dtype="<i2")
        self._captured_at = end
        if media:  # the track's first sample is the timeline's input 0, and its filler counts as input
            self.metrics.input_sent(padded + len(pcm), end, self.rate)
            return pcm, False
        return None, self.append(self.mic.captured(pcm, carrying=True), end)

    def input_ended(self, now: float) -> bool:
        """The input is over: the chunk it holds goes; whether one did."""
        held = self.mic.chunker.take()  # captured by the last block's end, not now
        return self.append(held, self._captured_at if self._captured_at is not None else now)

    def append(self, chunk: np.ndarray | None, now: float) -> bool:
        """``chunk``, its last sample captured at ``now``, to the session started on the connection carrying it."""
        protocol = self.carrier.current
        if chunk is None or not self.carrier.carrying or protocol is None or protocol.closed or not protocol.started:
            return False
        self.metrics.input_sent(len(chunk), now, self.rate)  # its last sample captured at now
        protocol.append_audio(chunk.astype("<i2").tobytes())
        return True

    def commit(self, now: float, turn: int | None) -> bool:
        """The released turn's last chunk, then mute (``turn``: only that release's); whether a release was due."""
        if not self.mic.take_release(turn):
            return False
        self.append(self.mic.chunker.take(), now)
        self.carrier.set_muted(True)
        return True
