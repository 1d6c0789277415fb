"""Microphone audio gathered into chunks before it goes out as ``input_audio_buffer.append``.

Each append is one WebSocket frame and one socket write at both ends; at 20 ms a frame,
those dominate what a session costs. :class:`InputChunker` collects captured blocks and
hands back a chunk once it holds ``chunk_samples`` (a block never waits longer than that);
whatever is left goes with :meth:`InputChunker.take` (before a commit, at the end of the
input). Plain and synchronous; the session owns the sending.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["InputChunker"]

Samples = npt.NDArray[np.int16]


class InputChunker:
    """Blocks in, chunks of at least ``chunk_samples`` out (one block at a time when ``chunk_samples`` <= a block)."""

    def __init__(self, chunk_samples: int) -> None:
        if chunk_samples < 1:
            raise ValueError(f"a chunk holds at least one sample, not {chunk_samples}")
        self.chunk_samples = chunk_samples
        self._blocks: list[Samples] = []
        self._held = 0

    @property
    def held(self) -> int:
        """Samples waiting for the chunk to fill."""
        return self._held

    def add(self, block: Samples) -> Samples | None:
        """Keep ``block``; the whole chunk once it is full (else ``None``)."""
        if not len(block):
            return None
        self._blocks.append(block)
        self._held += len(block)
        return self.take() if self._held >= self.chunk_samples else None

    def take(self) -> Samples | None:
        """Everything held, as one array (``None`` when nothing is)."""
        if not self._blocks:
            return None
        blocks, self._blocks, self._held = self._blocks, [], 0
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)

    def clear(self) -> int:
        """Drop what is held (the journal resends it on a new connection); how many samples that was."""
        dropped, self._blocks, self._held = self._held, [], 0
        return dropped
