"""The capture path: microphone block → echo cancellation → local voice activity.

:class:`CapturePath` is plain and synchronous. For each microphone block it takes the
listener time at which the block's last sample was captured, reads the reference (what
reached the listener over the same samples) from the playout's
:class:`~voxline.audio.reference.PlayedRing`, runs the echo canceller and the local VAD,
and returns the block to send and the onsets (listener seconds) of local speech. A canceller
named by its backend is gated (:class:`~voxline.audio.aec.GatedCanceller`): where the
microphone does not hear the speaker it hands the microphone on untouched, and the local VAD
then has no residual echo to refuse.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxline.audio.aec import EchoCanceller, GatedCanceller, make_canceller
from voxline.audio.local_vad import LocalVad
from voxline.base.errors import AudioError
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.reference import PlayedRing
from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["CapturePath", "attach_ring", "default_capture"]

Samples = npt.NDArray[np.int16]


def attach_ring(playout: PlayoutBuffer) -> PlayedRing:
    """The playout's reference ring, attached now if it has none."""
    ring = playout.reference
    if ring is None:
        ring = PlayedRing()
        playout.attach_reference(ring)
    return ring


def default_capture() -> tuple[EchoCanceller, LocalVad] | str:
    """What a session on sound devices runs by default: the gated AEC3 and the local VAD.

    Both come with ``voxline[aec]``; without it, the one-line reason (the session then sends
    the microphone as it is). The gate makes this safe where there is no echo: the microphone
    passes untouched, so a barge-in is never later than without a canceller.
    """
    try:
        return make_canceller("webrtc"), LocalVad("webrtc")
    except AudioError as exc:
        return str(exc)


class CapturePath:
    """Echo cancellation and local VAD on the microphone, referenced to the playout."""

    def __init__(self, playout: PlayoutBuffer, *, aec: EchoCanceller | str | None = None,
                 vad: LocalVad | str | None = None) -> None:
        self.ring = attach_ring(playout)
        self.aec = make_canceller(aec) if isinstance(aec, str) else aec
        self.vad = LocalVad(vad) if isinstance(vad, str) else vad
        self._next: int | None = None

    def process(self, block: Samples, end_time: float) -> tuple[Samples, list[float]]:
        """``block`` ends at listener time ``end_time`` → (the block to send, local speech onsets in seconds)."""
        n = len(block)
        start = int(round(end_time * SAMPLE_RATE)) - n
        if self._next is not None and abs(start - self._next) <= SAMPLE_RATE // 100:
            start = self._next  # contiguous capture: keep the count exact through clock jitter
        self._next = start + n
        ref = self.ring.read(start, n)
        out = self.aec.process(block, ref) if self.aec is not None else block
        if self.vad is None:
            return out, []
        no_echo = isinstance(self.aec, GatedCanceller) and self.aec.echo_path is False
        if self.vad.double_talk is not None and isinstance(self.aec, GatedCanceller):
            self.vad.double_talk.delay_ms = self.aec.monitor.path_delay_ms if self.aec.echo_path else None
        # no echo path: nothing to gate, nor to tell a voice from
        onsets = self.vad.process(out, None if no_echo else ref, start, raw=block)
        return out, [i / SAMPLE_RATE for i in onsets]
