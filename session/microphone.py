"""The microphone half of :class:`~voxline.session.voice.VoiceSession`: captured blocks to the server.

Each block of the session's input is echo-cancelled first when the session has a capture
path (:class:`~.capture.CapturePath`, whose local VAD may hold the assistant), kept in the
:class:`~.input_journal.InputJournal` until the server has it for good, and appended to the
live connection in chunks (:mod:`.input_chunks`); over WebRTC it goes to the media track.

A :class:`~.media.Recording` on a real clock with no capture path is taken as a step of the
loop's stepper (:func:`~voxline.base.clock.run_steps`) and written to the socket at once where
the transport can (:meth:`~voxline.realtime.connection.RealtimeConnection.flush_now`): a
session's microphone then costs the loop no task wake-up per block. Any other input is read
block by block by the capture task. ``VoiceSession`` is the one class that uses this; the
attributes below are the session's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

import numpy as np

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import RealClock, Step, run_steps
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed

from .media import Recording

if TYPE_CHECKING:
    from .capture import CapturePath
    from .core import Effects, SessionCore
    from .input_chunks import InputChunker
    from .input_journal import InputJournal
    from .media import Output
    from .metrics import SessionMetrics
    from .track_audio import TrackTagger

__all__ = ["Microphone"]


class Microphone:
    """The input side of a :class:`~voxline.session.voice.VoiceSession` (see the module docstring)."""

    output: Output
    core: SessionCore | None
    journal: InputJournal
    track: TrackTagger | None
    _conn: RealtimeConnection | None
    _live: bool
    _talking: bool
    _capture: CapturePath | None
    _chunker: InputChunker
    _metrics: SessionMetrics
    _input_finished: bool
    _flush_needed: asyncio.Event

    if TYPE_CHECKING:  # VoiceSession's own
        async def _apply(self, effects: Effects) -> None: ...
        async def _flush(self) -> None: ...

    async def _capture_loop(self, blocks: AsyncIterable[np.ndarray]) -> None:
        try:
            if (isinstance(blocks, Recording) and self._capture is None and isinstance(blocks.clock, RealClock)
                    and blocks.due is not None):
                await run_steps(blocks.clock, self._capture_step(blocks), blocks.due)
            else:
                async for item in blocks:
                    block = await self._captured(item) if self._capture is not None else item
                    if self._capture_block(block) and self._conn is not None:
                        with contextlib.suppress(ConnectionClosed):
                            await self._conn.flush()
            if self._send_input(self._chunker.take()):  # the input's last chunk
                await self._flush()
        finally:
            self._input_finished = True

    def _capture_step(self, recording: Recording) -> Step:
        """The blocks of ``recording`` captured by each step's time, sent before the step returns."""
        def step(now: float) -> float | None:
            sent = False
            for block in recording.take(now):
                sent = self._capture_block(block) or sent
            if sent:
                self._flush_now()
            return recording.due
        return step

    def _capture_block(self, block: np.ndarray) -> bool:
        """One captured block towards the server; True if a frame waits to be flushed."""
        conn = self._conn
        if not self._talking or conn is None:
            return False
        pcm = np.ascontiguousarray(block, dtype="<i2")
        media = conn.transport.media if self._live else None
        if media is not None:  # WebRTC: the microphone is a media track
            self._metrics.input_sent(len(pcm), self.output.now(), conn)
            media.push_audio(pcm)
            return False
        if self.track is None:
            self.journal.captured(pcm)  # kept until the server has it for good
        if not self._live or conn.closed:
            return False  # away: the journal holds it, and the restore resends what is needed
        return self._send_input(self._chunker.add(pcm))

    def _send_input(self, chunk: np.ndarray | None) -> bool:
        """Append a chunk of captured audio on the live connection (:mod:`.input_chunks`); True if one went."""
        conn = self._conn
        if chunk is None or conn is None or not self._live or conn.closed:
            return False
        self._metrics.input_sent(len(chunk), self.output.now(), conn)  # captured up to now
        conn.protocol.append_audio(chunk.tobytes())
        return True

    def _flush_now(self) -> None:
        """The frames queued on the connection, written now where the transport can; the rest by the flush task."""
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.flush_now():
                return
        except ConnectionClosed:
            return  # the receive loop sees the close
        self._flush_needed.set()

    async def _captured(self, item: np.ndarray | tuple[float, np.ndarray]) -> np.ndarray:
        """Echo-cancel a block; a local speech onset holds the assistant (:meth:`SessionCore.local_speech`).

        A block comes alone (captured just now) or as ``(adc_time, block)`` from a device whose
        ADC times share the output's clock (:meth:`voxline.audio.devices.MicSource.blocks`).
        """
        assert self._capture is not None
        now = self.output.now()
        if isinstance(item, tuple):
            adc, block = item
            end = adc + len(block) / SAMPLE_RATE
        else:
            block, end = item, now
        out, onsets = self._capture.process(np.asarray(block, dtype=np.int16), end)
        if onsets and self.core is not None:
            await self._apply(self.core.local_speech(now, onsets[0]))
        return out
