"""The server-owned output audio buffer of a WebRTC call (``output_audio_buffer.*``).

Over WebRTC the service, not the client, plays assistant audio: deltas are queued
here and the outgoing media track reads 20 ms at a time in real time. Sans-I/O and
clock-free: callers pass samples in and read samples out.

- :meth:`OutputAudioBuffer.read` reports :class:`Started` when the first sample of
  a response is handed out and :class:`Stopped` once a response whose audio is
  complete (:meth:`~OutputAudioBuffer.finish`) has been played out, or when the
  next response's audio takes over.
- :meth:`OutputAudioBuffer.clear` drops everything not yet played
  (``output_audio_buffer.clear``, or a VAD barge-in) and reports what was cut: the
  response, and per item how many samples were played, for the server-side
  truncation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Cleared", "OutputAudioBuffer", "Started", "Stopped"]

Samples = npt.NDArray[np.int16]


@dataclass(frozen=True, slots=True)
class Started:
    """``output_audio_buffer.started``: the response's first sample went out."""

    response_id: str


@dataclass(frozen=True, slots=True)
class Stopped:
    """``output_audio_buffer.stopped``: the response's audio has been played out."""

    response_id: str


@dataclass(frozen=True, slots=True)
class Cleared:
    """``output_audio_buffer.cleared``: what a clear cut.

    ``response_id`` is the response playing (or about to), else the last one that
    played; ``None`` when no response ever had audio. ``cut`` lists, in play order,
    ``(item_id, samples played)`` for every item that lost audio.
    """

    response_id: str | None
    cut: tuple[tuple[str, int], ...]
    dropped_samples: int


Notice = Started | Stopped


@dataclass(slots=True, eq=False)
class _Chunk:
    response_id: str
    item_id: str
    samples: Samples
    pos: int = 0


class OutputAudioBuffer:
    """Assistant audio queued for the outgoing track (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: deque[_Chunk] = deque()
        self._played: dict[str, int] = {}
        self._finished: set[str] = set()
        self._playing: str | None = None  # response started and not stopped or cleared
        self._last: str | None = None  # last response that played
        self._last_item: str | None = None  # last item that played
        self.queued_samples = 0

    @property
    def playing(self) -> str | None:
        """The response started and not yet stopped or cleared."""
        return self._playing

    @property
    def audible(self) -> bool:
        """Is audio playing or waiting to play?"""
        return self._playing is not None or self.queued_samples > 0

    def played_samples(self, item_id: str) -> int:
        return self._played.get(item_id, 0)

    def push(self, response_id: str, item_id: str, samples: Samples) -> None:
        """Queue a run of an item's audio (int16 mono 24 kHz)."""
        if samples.size:
            self._queue.append(_Chunk(response_id, item_id, np.asarray(samples, dtype=np.int16)))
            self.queued_samples += samples.size

    def finish(self, response_id: str) -> None:
        """No more audio will come for ``response_id`` (``response.done``)."""
        self._finished.add(response_id)

    def read(self, n: int) -> tuple[Samples, list[Notice]]:
        """The next ``n`` samples (silence where nothing is queued) and the notices they cause."""
        out = np.zeros(n, dtype=np.int16)
        notices: list[Notice] = []
        filled = 0
        while filled < n and self._queue:
            chunk = self._queue[0]
            if chunk.response_id != self._playing:
                if self._playing is not None:
                    notices.append(Stopped(self._playing))
                self._playing = self._last = chunk.response_id
                notices.append(Started(chunk.response_id))
            count = min(n - filled, chunk.samples.size - chunk.pos)
            out[filled : filled + count] = chunk.samples[chunk.pos : chunk.pos + count]
            chunk.pos += count
            filled += count
            self._played[chunk.item_id] = self._played.get(chunk.item_id, 0) + count
            self._last_item = chunk.item_id
            if chunk.pos == chunk.samples.size:
                self._queue.popleft()
        self.queued_samples -= filled
        if not self._queue and self._playing in self._finished:
            notices.append(Stopped(self._playing))
            self._playing = None
        return out, notices

    def clear(self) -> Cleared:
        """Drop what has not been played; report the response and the items cut."""
        response_id = self._playing or (self._queue[0].response_id if self._queue else self._last)
        items: dict[str, None] = {}
        if self._playing is not None and self._last_item is not None:
            items[self._last_item] = None
        for chunk in self._queue:
            items[chunk.item_id] = None
        dropped = self.queued_samples
        self._queue.clear()
        self.queued_samples = 0
        self._playing = None
        cut = tuple((item_id, self._played.get(item_id, 0)) for item_id in items)
        return Cleared(response_id, cut, dropped)
