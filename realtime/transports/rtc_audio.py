"""Audio on WebRTC media tracks: int16 mono 24 kHz blocks ↔ aiortc frames.

- :class:`SampleQueue`: a FIFO of samples that always hands out a whole frame
  (silence when empty), the feed of an outgoing track.
- :class:`PacedAudioTrack`: an outgoing ``MediaStreamTrack`` producing 20 ms
  ``av.AudioFrame`` s (s16 stereo at 24 kHz, both channels equal) paced by sample
  count on a clock, silence when nothing is queued; aiortc's Opus encoder resamples
  them to 48 kHz. Sending two equal channels avoids the -3 dB a mono→stereo upmix would add.
- :class:`MicrophoneTrack`: a client's microphone: nothing until the first samples are
  queued, then paced as :class:`PacedAudioTrack` a frame behind the blocks pushed, so the
  peer's sample 0 is the first sample pushed (as a WebSocket server's is the first appended
  one) and a microphone's blocks, pushed as they are captured, are never raced by the frames
  that carry them.
- :class:`QueuedAudioTrack`: the same frames, but only what was queued, each sample once and
  no filler: frame *k* carries queued samples ``[480k, 480k + 480)``, so the RTP clock of the
  track is the sender's count of queued samples (a GPT-Live output track is its session's
  timeline).
- :class:`RemoteAudioDecoder`: a received frame (Opus decodes to s16 stereo 48 kHz,
  960 samples) → channel 0 → int16 mono 24 kHz, with a streaming soxr resampler. Blocks
  follow the sender's RTP clock: a frame whose timestamp lies past the end of the previous
  one (packets lost, or dropped by the jitter buffer) comes after the silence they would
  have filled, so a count of the samples handed out is the position on the sender's track. The
  silence is at most the time that passed since the previous frame came (on the decoder's clock): a
  sender whose RTP clock jumps ahead made minutes of silence a second, which no loss explains.
"""

from __future__ import annotations

import asyncio
import fractions
from collections import deque
from collections.abc import Callable

import av
import numpy as np
import numpy.typing as npt
import soxr
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock

__all__ = [
    "FRAME_SAMPLES",
    "LEAD_S",
    "MAX_GAP_S",
    "MicrophoneTrack",
    "PacedAudioTrack",
    "QueuedAudioTrack",
    "RemoteAudioDecoder",
    "SampleQueue",
    "audio_frame",
    "pump_remote_audio",
]

FRAME_SAMPLES = 480  # 20 ms, the WebRTC audio packet time
MAX_GAP_S = 5.0  # a longer jump of the RTP clock is a new start, not lost packets to fill with silence
LEAD_S = 0.5  # how far a received track may run ahead of the time since its first frame (the network's jitter)

Samples = npt.NDArray[np.int16]


class SampleQueue:
    """int16 samples waiting to be sent; :meth:`take` always returns exactly ``n``."""

    def __init__(self) -> None:
        self._blocks: deque[Samples] = deque()
        self._queued = 0
        self.padded = 0
        """Samples of silence :meth:`take` handed out for want of queued ones (since whoever reads it set it to 0)."""

    @property
    def queued(self) -> int:
        return self._queued

    def push(self, block: npt.ArrayLike) -> None:
        """Queue a 1-D int16 block (copied)."""
        samples = np.asarray(block)
        if samples.dtype != np.int16 or samples.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {samples.dtype} with shape {samples.shape}")
        if samples.size:
            self._blocks.append(samples.copy())
            self._queued += samples.size

    def take(self, n: int) -> Samples:
        """The next ``n`` samples, zero-padded when fewer are queued."""
        out = np.zeros(n, dtype=np.int16)
        filled = 0
        while filled < n and self._blocks:
            head = self._blocks[0]
            count = min(n - filled, head.size)
            out[filled : filled + count] = head[:count]
            filled += count
            if count == head.size:
                self._blocks.popleft()
            else:
                self._blocks[0] = head[count:]
        self._queued -= filled
        self.padded += n - filled
        return out

    def clear(self) -> int:
        """Drop everything queued; return how many samples were dropped."""
        dropped, self._queued = self._queued, 0
        self._blocks.clear()
        return dropped


def audio_frame(samples: Samples, pts: int) -> av.AudioFrame:
    """One s16 stereo frame at 24 kHz carrying ``samples`` on both channels."""
    stereo = np.repeat(np.ascontiguousarray(samples, dtype="<i2"), 2)
    frame = av.AudioFrame(format="s16", layout="stereo", samples=samples.size)
    frame.planes[0].update(stereo.tobytes())
    frame.sample_rate = SAMPLE_RATE
    frame.pts = pts
    frame.time_base = fractions.Fraction(1, SAMPLE_RATE)
    return frame


class PacedAudioTrack(MediaStreamTrack):
    """An outgoing audio track: ``pull(n)`` gives each 20 ms frame, released in real time.

    Frame *k* is released at ``start + k * 20 ms`` on ``clock`` (the first at once), so a
    slow consumer catches up instead of drifting. ``pull`` runs on the event loop.
    """

    kind = "audio"

    def __init__(self, pull: Callable[[int], Samples], clock: Clock | None = None) -> None:
        super().__init__()
        self._pull = pull
        self._clock = clock or RealClock()
        self._start: float | None = None
        self._sent = 0

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = self._clock.now()
        else:
            delay = self._start + self._sent / SAMPLE_RATE - self._clock.now()
            if delay > 0:
                await self._clock.sleep(delay)
        if self.readyState != "live":
            raise MediaStreamError
        frame = audio_frame(self._pull(FRAME_SAMPLES), self._sent)
        self._sent += FRAME_SAMPLES
        return frame


class MicrophoneTrack(PacedAudioTrack):
    """A client's microphone track (see the module docstring); :meth:`pushed` after each push.

    Silence sent before the first samples (while the call connects and the session starts)
    would count on the peer's input timeline: a server would place the user's speech that
    much later than it was said, and every turn's latency would read that much shorter.
    The frames are paced from one frame after the first block pushed was whole: a microphone's
    blocks, pushed as they are captured (each as long as the first), are queued a frame before
    the frames that carry them are due, and blocks pushed late (the call was still connecting)
    go out at once.
    """

    def __init__(self, queue: SampleQueue, clock: Clock | None = None) -> None:
        super().__init__(queue.take, clock)
        self._queue = queue
        self._pushed = asyncio.Event()

    def pushed(self, samples: int, age_s: float = 0.0) -> None:
        """``samples`` were queued, the last of them captured ``age_s`` ago."""
        if self._start is None and samples > 0:
            age = age_s if 0.0 <= age_s <= 60.0 else 0.0  # not a time (NaN, infinite, negative): as if just captured
            self._start = self._clock.now() - age + FRAME_SAMPLES / SAMPLE_RATE
        self._pushed.set()

    def stop(self) -> None:
        super().stop()
        self._pushed.set()  # a recv waiting for the first samples ends

    async def recv(self) -> av.AudioFrame:
        while self.readyState == "live" and self._start is None:
            self._pushed.clear()
            await self._pushed.wait()
        return await super().recv()


class QueuedAudioTrack(PacedAudioTrack):
    """An outgoing audio track of what was queued, and nothing else (see the module docstring).

    Paced as :class:`PacedAudioTrack` from the first whole frame, except that a frame whose
    samples are not all queued yet waits for them (:meth:`wake` after a push) and then goes at
    once. ``recv`` runs on the event loop.
    """

    def __init__(self, queue: SampleQueue, clock: Clock | None = None) -> None:
        super().__init__(queue.take, clock)
        self._queue = queue
        self._more = asyncio.Event()

    def wake(self) -> None:
        """Samples were queued."""
        self._more.set()

    def stop(self) -> None:
        super().stop()
        self._more.set()  # a recv waiting for samples ends

    async def recv(self) -> av.AudioFrame:
        while self.readyState == "live" and self._queue.queued < FRAME_SAMPLES:
            self._more.clear()
            await self._more.wait()
        return await super().recv()


class RemoteAudioDecoder:
    """Received frames (s16 or s16p, any layout and rate) → channel 0 as int16 mono 24 kHz, on the RTP clock;
    ``clock`` says when each frame came."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or RealClock()
        self._rate: int | None = None
        self._stream: soxr.ResampleStream | None = None
        self._next_pts: int | None = None  # where the next frame starts if nothing was lost (frame's time base)
        self._began: float | None = None  # when the first frame came
        self._made = 0  # samples made since then, silence included (at the frames' rate)

    def decode(self, frame: av.AudioFrame) -> Samples:
        data = frame.to_ndarray()
        channels = len(frame.layout.channels)
        if frame.format.name not in ("s16", "s16p"):
            raise ValueError(f"unexpected audio sample format {frame.format.name}")
        first = data[0] if frame.format.is_planar else data.reshape(-1)[::channels]
        mono = np.ascontiguousarray(first, dtype=np.int16)
        mono = self._after_gap(frame, mono)
        if frame.sample_rate != self._rate:
            self._rate = frame.sample_rate
            same = self._rate == SAMPLE_RATE
            self._stream = None if same else soxr.ResampleStream(self._rate, SAMPLE_RATE, 1, dtype="int16")
        if self._stream is None:
            return mono
        out: Samples = self._stream.resample_chunk(mono)
        return out

    def _after_gap(self, frame: av.AudioFrame, mono: Samples) -> Samples:
        """``mono`` after the silence of the frames lost since the previous one (their RTP time), as long as the
        track stays within :data:`LEAD_S` of the time since its first frame came: a sender's clock that jumps
        ahead at every packet makes no more track than time passes, while packets lost inside a burst (a jitter
        buffer letting go of what it held) still keep what follows in its place."""
        pts, rate = frame.pts, frame.sample_rate
        now = self._clock.now()
        if pts is None or not rate:
            return mono
        if self._began is None or rate != self._rate:
            self._began, self._made = now, 0  # a rate of its own: counted afresh
        base = frame.time_base or fractions.Fraction(1, rate)
        expected, self._next_pts = self._next_pts, pts + int(mono.size / (base * rate))
        missing = 0 if expected is None or pts <= expected else int((pts - expected) * base * rate)
        if missing > MAX_GAP_S * rate:
            missing = 0  # a new start of the sender's clock: nothing to make up
        room = round((now - self._began + LEAD_S) * rate) - self._made - mono.size
        missing = max(0, min(missing, room))
        # a pause without packets (a sender that sends none in silence) is no credit for silence later: the track
        # is counted no further behind time than the lead, so a clock that jumps after a pause gains a lead's worth
        self._made = max(self._made + missing + mono.size, round((now - self._began - LEAD_S) * rate))
        if missing == 0:
            return mono
        return np.concatenate([np.zeros(missing, dtype=np.int16), mono])


async def pump_remote_audio(track: MediaStreamTrack, sink: Callable[[Samples], None],
                            clock: Clock | None = None) -> None:
    """Read ``track`` until it ends, handing each decoded 24 kHz block to ``sink`` (``clock``: when frames come)."""
    decoder = RemoteAudioDecoder(clock)
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        assert isinstance(frame, av.AudioFrame)
        block = decoder.decode(frame)
        if block.size:
            sink(block)
