"""What a :class:`~voxline.session.VoiceSession` captures from, besides a live microphone.

An *input* is any async iterable of int16 blocks at 24 kHz: :class:`Recording` (a recording
paced as a microphone would hand it over, read from an array or streamed from a file through
a :class:`SampleFeed`: :class:`ArrayFeed`, :class:`WavFeed`), :func:`file_blocks` (a paced source),
:func:`mic_blocks` (a device's ``(adc_time, block)`` pairs, times dropped), :func:`watched` (an
input whose blocks something looks at on the way: a level meter, a recorder), and
:func:`echoed_blocks` (open speakers simulated: the room's echo of what was heard added).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from typing import Generic, Protocol, Self, TypeVar, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from voxline.base.arguments import clock_like, real, whole
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock
from voxline.audio.clocked_output import BLOCK
from voxline.audio.reference import PlayedRing
from voxline.audio.room import RoomEcho
from voxline.audio.resample import StreamResampler
from voxline.audio.sources import Source
from voxline.audio.wavio import PathLike, WavReader

__all__ = ["ArrayFeed", "Recording", "SampleFeed", "SteppedInput", "WavFeed", "as_feed", "echoed_blocks", "file_blocks",
           "mic_blocks", "watched"]

Samples = npt.NDArray[np.int16]
READ_BYTES = 1 << 18  # a file is read 256 KiB at a time, whatever its header says


class SampleFeed(Protocol):
    """A recording read front to back: int16 mono samples at 24 kHz, :attr:`frames` of them in all."""

    @property
    def frames(self) -> int:
        """How many samples the whole recording holds."""
        ...

    def read(self, n: int) -> Samples:
        """The next ``n`` samples (fewer only at the end; empty after it)."""
        ...


class ArrayFeed:
    """A recording held in memory as one array."""

    def __init__(self, samples: Samples) -> None:
        self.samples = samples
        self._next = 0

    @property
    def frames(self) -> int:
        return len(self.samples)

    def read(self, n: int) -> Samples:
        block = self.samples[self._next : self._next + n]
        self._next += len(block)
        return block


def as_feed(samples: Samples | SampleFeed) -> SampleFeed:
    """An array as an :class:`ArrayFeed`; a feed as it is; anything else one :class:`TypeError` line."""
    if isinstance(samples, np.ndarray):
        if samples.dtype != np.int16 or samples.ndim != 1:
            raise TypeError(f"a recording takes int16 mono samples (a 1-D int16 array), not a {samples.dtype} "
                            f"array of shape {samples.shape}")
        return ArrayFeed(samples)
    if not (hasattr(samples, "frames") and callable(getattr(samples, "read", None))):
        raise TypeError(f"a recording takes a 1-D int16 array or a sample feed such as WavFeed(path), "
                        f"not {type(samples).__name__}")
    return samples


class WavFeed:
    """A WAV file streamed as 24 kHz mono (resampled as it is read): memory does not grow with its length.

    :attr:`frames` is ``round(frames_in * 24000 / rate)``, the length the whole file resampled has;
    :attr:`reader` is open for its notes (channels, conversion) until :meth:`close`.
    """

    def __init__(self, path: PathLike, channel: int | None = None) -> None:
        if channel is not None:
            whole(channel, "channel", low=0)
        self.reader = WavReader(path)
        if channel is not None and channel >= self.reader.channels:
            channels = self.reader.channels
            self.reader.close()
            raise ValueError(f"channel takes 0..{channels - 1} for this {channels}-channel file, not {channel}")
        self.reader.channel = channel
        rate = self.reader.rate
        self.frames = round(self.reader.frames * SAMPLE_RATE / rate)
        self._resampler: StreamResampler | None = StreamResampler(rate, SAMPLE_RATE)
        self._chunk = max(1, READ_BYTES // (self.reader.sample_width * self.reader.channels))
        self._held = np.zeros(0, dtype=np.int16)  # resampled, not handed over yet, from _at on
        self._at = 0
        self._given = 0

    def read(self, n: int) -> Samples:
        """The next ``n`` samples, a copy of their own: whoever keeps a block keeps only it."""
        n = max(0, min(n, self.frames - self._given))
        parts = [self._held[self._at :]]
        held = len(parts[0])
        while held < n:
            out = self._more()
            if out is None:
                break
            parts.append(out)
            held += len(out)
        if len(parts) > 1:
            self._held, self._at = np.concatenate(parts), 0
        block = self._held[self._at : self._at + n].copy()
        self._at += len(block)
        if len(block) < n:  # the filter's last output came up short of the rounded length
            block = np.concatenate([block, np.zeros(n - len(block), dtype=np.int16)])
        self._given += n
        return block

    def _more(self) -> Samples | None:
        """The next chunk of the file, resampled; ``None`` once the file and the filter are spent."""
        if self._resampler is None:
            return None
        raw = self.reader.read(self._chunk)
        if len(raw):
            return self._resampler.process(raw)
        tail, self._resampler = self._resampler.flush(), None
        return tail

    def read_all(self) -> Samples:
        """What is left of the recording, as one array."""
        return self.read(self.frames - self._given)

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mic_blocks(mic: AsyncIterable[tuple[float, np.ndarray]]) -> AsyncIterable[np.ndarray]:
    """Blocks from :class:`~voxline.audio.devices.MicSource` (``(adc_time, block)`` pairs), times dropped.

    A microphone's :meth:`~voxline.audio.devices.MicSource.blocks` stays a :class:`SteppedInput`."""
    if isinstance(mic, SteppedInput):
        return _Untimed(mic, mic)
    return _untimed(mic)


async def _untimed(mic: AsyncIterable[tuple[float, np.ndarray]]) -> AsyncIterator[np.ndarray]:
    async for _t, block in mic:
        yield block


@runtime_checkable
class SteppedInput(Protocol):
    """An input a session can read as a step of its loop's stepper (:func:`~voxline.base.steps.run_steps`),
    with no task wake-up per block: :attr:`due` on :attr:`clock` (None once over), :meth:`take`
    what is due by then. :class:`Recording` and :func:`file_blocks` are such inputs."""

    @property
    def clock(self) -> Clock: ...

    @property
    def due(self) -> float | None: ...

    def take(self, now: float) -> Sequence[np.ndarray | tuple[float, np.ndarray]]:
        """What is due by ``now``, in order: blocks, or ``(adc_time, block)`` pairs from a device."""


class _Delegated:
    """A stepped input's clock and due time, passed through."""

    def __init__(self, stepped: SteppedInput) -> None:
        self._stepped = stepped

    @property
    def clock(self) -> Clock:
        return self._stepped.clock

    @property
    def due(self) -> float | None:
        return self._stepped.due

    @property
    def capture_rate(self) -> int:
        """The rate of the blocks: a microphone's (``MicBlocks.capture_rate``), else 24 kHz."""
        rate = getattr(self._stepped, "capture_rate", SAMPLE_RATE)
        return rate if isinstance(rate, int) else SAMPLE_RATE


class _SourceBlocks(_Delegated):
    """A paced source's blocks (their samples): an async iterable, or a stepped input."""

    def __init__(self, source: Source, stepped: SteppedInput) -> None:
        super().__init__(stepped)  # the same source, read by a stepper
        self._source = source

    def take(self, now: float) -> Sequence[np.ndarray | tuple[float, np.ndarray]]:
        return self._stepped.take(now)

    async def __aiter__(self) -> AsyncIterator[np.ndarray]:
        async for frame in self._source:
            yield frame.samples


class _Untimed(_Delegated):
    """A stepped device input's blocks without their times."""

    def __init__(self, pairs: AsyncIterable[tuple[float, np.ndarray]], stepped: SteppedInput) -> None:
        super().__init__(stepped)
        self._pairs = pairs

    def take(self, now: float) -> list[np.ndarray]:
        return [item[1] if isinstance(item, tuple) else item for item in self._stepped.take(now)]

    def __aiter__(self) -> AsyncIterator[np.ndarray]:
        return _untimed(self._pairs).__aiter__()


Item = TypeVar("Item", np.ndarray, tuple[float, np.ndarray])


def watched(blocks: AsyncIterable[Item], look: Callable[[Item], None]) -> AsyncIterable[Item]:
    """``blocks`` unchanged, with ``look`` called on each one as it is handed over, in order.

    A :class:`SteppedInput` stays one (``look`` runs in :meth:`~SteppedInput.take`), so a meter
    or a recorder on a microphone costs no task wake-up per block; anything ``look`` raises
    comes out where the block would have gone.
    """
    if isinstance(blocks, SteppedInput):
        return cast(AsyncIterable[Item], _Watched(blocks, blocks, look))
    return _watch(blocks, look)


async def _watch(blocks: AsyncIterable[Item], look: Callable[[Item], None]) -> AsyncIterator[Item]:
    async for item in blocks:
        look(item)
        yield item


class _Watched(_Delegated, Generic[Item]):
    """A stepped input whose blocks ``look`` sees as they are taken."""

    def __init__(self, blocks: AsyncIterable[Item], stepped: SteppedInput, look: Callable[[Item], None]) -> None:
        super().__init__(stepped)
        self._blocks: AsyncIterable[Item] = blocks
        self._look: Callable[[Item], None] = look

    def take(self, now: float) -> Sequence[Item]:
        items = cast(Sequence[Item], self._stepped.take(now))  # the items of the input this was made for
        for item in items:
            self._look(item)
        return items

    def __aiter__(self) -> AsyncIterator[Item]:
        return _watch(self._blocks, self._look).__aiter__()


def file_blocks(source: Source) -> AsyncIterable[np.ndarray]:
    """Blocks from a paced :class:`~voxline.audio.sources.Source` (e.g. a WAV file as the microphone).

    The sources of :mod:`voxline.audio.sources` are also read by a session's stepper, with no
    task wake-up per block (:class:`SteppedInput`); any other source block by block."""
    if isinstance(source, SteppedInput):
        return _SourceBlocks(source, source)
    return _frames(source)


async def _frames(source: Source) -> AsyncIterator[np.ndarray]:
    async for frame in source:
        yield frame.samples


class Recording:
    """A recording as the microphone: block ``k`` is handed over once captured, at
    ``origin + (k + 1)·block/24000`` (sample ``n`` is captured at ``origin + n/24000``).

    ``samples``: an int16 array, a :class:`SampleFeed`, or the path of a WAV file (streamed as 24 kHz mono through a
    :class:`WavFeed`, closed once read to its end). ``clock``: the session's (a :class:`~voxline.base.clock.RealClock`
    when not given, as a session's is). ``origin``: when the recording begins on it; when not given, the first time
    it is read (the session opening), so ``VoiceSession(settings, input=Recording("question.wav"))`` says the
    question as the session opens.

    It is an async iterable of its blocks, each yielded once captured (a late wake-up yields
    every block captured by then at once). A session on a real clock takes them instead as a
    step of the loop's stepper (:attr:`due`, :meth:`take`, :func:`~voxline.base.steps.run_steps`):
    a microphone then costs the loop no task wake-up per block.
    """

    def __init__(self, samples: Samples | SampleFeed | PathLike, clock: Clock | None = None,
                 origin: float | None = None, block: int = BLOCK) -> None:
        whole(block, "block (samples per block)", low=1)
        if origin is not None:
            real(origin, "origin")
        if clock is not None:
            clock_like(clock)
        self.clock = clock if clock is not None else RealClock()
        if isinstance(samples, (bytes, bytearray, list, tuple)):  # as_feed would not say a path is taken
            raise TypeError(f"a recording takes a WAV file's path, a 1-D int16 array or a sample feed, not "
                            f"{type(samples).__name__}")
        self._file = WavFeed(samples) if isinstance(samples, (str, os.PathLike)) else None
        self._feed = self._file if self._file is not None else as_feed(cast("Samples | SampleFeed", samples))
        self._frames = self._feed.frames
        self._origin = origin
        self._block = block
        self._next = 0  # the first sample not handed over
        self._closed = False
        self._claimed = False
        if not self._frames:
            self.close()  # nothing to read: the file is let go of at once

    @property
    def claimed(self) -> bool:
        """A reader (a session) took it: it is read once."""
        return self._claimed

    def claim(self) -> None:
        """Take the recording for one reader (a session's input)."""
        self._claimed = True

    def release(self) -> None:
        """Give the recording back, unread (a session closed before it read any of it): another reader may take it."""
        if not self.captured:
            self._claimed = False

    @property
    def captured(self) -> int:
        """How many samples were handed over so far: the whole recording once it is over."""
        return min(self._next, self._frames)

    @property
    def due(self) -> float | None:
        """When the next block is captured; ``None`` once every block was handed over."""
        n = self._frames
        if self._next >= n or self._closed:
            return None
        if self._origin is None:  # begins when first read
            self._origin = self.clock.now()
        return self._origin + min(self._next + self._block, n) / SAMPLE_RATE

    def take(self, now: float) -> list[np.ndarray]:
        """The blocks captured by ``now`` and not handed over yet, in order."""
        blocks = []
        while (due := self.due) is not None and due <= now:
            blocks.append(self._next_block())
        return blocks

    def _next_block(self) -> np.ndarray:
        block = self._feed.read(self._block)
        self._next += self._block
        if self._next >= self._frames:
            self.close()  # read to its end: a file opened here is let go of at once
        return block

    def close(self) -> None:
        """Hand over no more blocks, and let go of the file a path was opened as; idempotent."""
        self._closed = True
        if self._file is not None:
            self._file.close()

    async def __aiter__(self) -> AsyncIterator[np.ndarray]:
        while (due := self.due) is not None:
            if self.clock.now() < due:  # a block already captured (a late wake-up) follows at once
                await self.clock.sleep_until(due)
            yield self._next_block()


async def echoed_blocks(blocks: AsyncIterable[np.ndarray], room: RoomEcho, ring: PlayedRing) -> AsyncIterator[np.ndarray]:
    """Open speakers, simulated: each block plus the room's echo of what the listener heard.

    The blocks must start at listener sample 0 and follow each other without gaps (as
    :class:`Recording` with the output's origin does); each is handed over once
    captured, when everything the echo needs (listener samples at least the room's delay
    older) has been played into ``ring``.
    """
    start = 0
    async for block in blocks:
        yield room.mix(np.asarray(block, dtype=np.int16), ring, start)
        start += len(block)
