"""The machine's microphone side: captured blocks on their way to the server.

:class:`MicrophonePath` is plain and synchronous. A block is echo-cancelled first when the
session has a capture path (:class:`~voxline.session.capture.CapturePath`, whose local VAD
reports speech onsets), kept in the :class:`~voxline.session.input_journal.InputJournal`
until the server has it for good, and gathered into chunks (:mod:`voxline.session.input_chunks`);
the machine appends each chunk to the live connection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime.frames import user_audio_creates

from ..capture import CapturePath
from ..input_chunks import InputChunker
from ..input_journal import InputJournal

__all__ = ["Captured", "MIN_TURN_SAMPLES", "MicrophonePath", "block_end"]

MIN_TURN_SAMPLES = SAMPLE_RATE // 10
"""The service refuses to commit less than 100 ms of audio (``input_audio_buffer_commit_empty``)."""

Pcm = npt.NDArray[np.int16]
Captured = Pcm | tuple[float, Pcm]
"""A block as an input yields it: alone (captured just now) or as ``(adc_time, block)`` from a device."""


def block_end(item: Captured, now: float) -> float:
    """When a block's last sample was captured: a device block's ADC time plus its length (the ADC
    times share the output's clock); any other block's ``now``."""
    if isinstance(item, tuple):
        if len(item) != 2:
            raise TypeError(f"an input pair is (capture time in s, block), not a tuple of {len(item)}")
        adc, block = item
        if isinstance(adc, bool) or not isinstance(adc, (int, float, np.floating, np.integer)) or not math.isfinite(adc):
            raise TypeError(f"an input pair's capture time is a finite number of seconds, not {type(adc).__name__} "
                            f"{adc!r:.40}")
        return float(adc + len(block) / SAMPLE_RATE)
    return now


class MicrophonePath:
    """Capture path, journal and chunker of one session (see the module docstring)."""

    def __init__(self, *, padding_ms: int, chunk_samples: int, capture: CapturePath | None,
                 push_to_talk: bool, journaled: bool, over_track: bool = False) -> None:
        self.journal = InputJournal(padding_ms=padding_ms)
        self.chunker = InputChunker(chunk_samples)
        self.capture = capture
        self.push_to_talk = push_to_talk
        self.talking = not push_to_talk
        self.turn_samples = 0  # what the server was given since push-to-talk was pressed, filler included
        self._releases = 0  # push-to-talk releases so far: each names its turn
        self._released = 0  # the release whose turn is not committed yet (0: none)
        self._journaled = journaled  # False where nothing is ever resent (GPT-Live)
        self.speech_only = over_track and not push_to_talk
        """A call's media track with the server's VAD: only the speech the server noticed is resent, as items."""

    def press(self) -> None:
        """Push-to-talk pressed: what is captured from now on is the turn."""
        self.talking = True
        self.turn_samples = 0

    def release(self) -> int:
        """Push-to-talk let go: nothing more goes out. The number naming the released turn."""
        self.talking = False
        self._releases += 1
        self._released = self._releases
        return self._released

    def take_release(self, turn: int | None = None) -> bool:
        """True once for the released turn (``turn``: only if it is that release's, not a later one's)."""
        if not self._released or (turn is not None and turn != self._released):
            return False
        self._released = 0
        return True

    def clean(self, item: Captured, now: float) -> tuple[Pcm, float | None, float]:
        """A block echo-cancelled where the session has a capture path; the first local speech onset
        in it; the listener time its last sample was captured (:func:`block_end`)."""
        end = block_end(item, now)
        pcm = np.asarray(item[1] if isinstance(item, tuple) else item)
        if pcm.dtype != np.int16 or pcm.ndim != 1:  # a float block cast to int16 would be silence, and said nothing
            raise TypeError(f"an input block is a 1-D int16 array (24 kHz mono), not {pcm.dtype} of shape {pcm.shape}")
        if self.capture is None:
            return pcm, None, end
        out, onsets = self.capture.process(pcm, end)
        return out, (onsets[0] if onsets else None), end

    def keep(self, pcm: Pcm, padded: int = 0) -> None:
        """A block a media track sends, after ``padded`` samples of silence it sent for want of one in time:
        journaled until the server has it for good (the silence too where the server's VAD places speech on
        the track's timeline)."""
        self.turn_samples += padded + len(pcm)
        if self._journaled:
            if self.speech_only:
                self.journal.padded(padded)
            self.journal.captured(pcm)

    def captured(self, pcm: Pcm, *, carrying: bool) -> Pcm | None:
        """Keep a block; the chunk to append now, if one is full and the connection is live."""
        self.turn_samples += len(pcm)
        if self._journaled:
            self.journal.captured(pcm)  # kept until the server has it for good
        if not carrying:
            return None  # away: the journal holds it, and the restore resends what is needed
        return self.chunker.add(pcm)

    def resume(self, *, handover: bool) -> Pcm | None:
        """What a new connection must be sent of the user's unfinished turn."""
        if handover:
            self.journal.restart(unsent=self.chunker.held)  # those go on the new connection
            return None
        self.chunker.clear()  # the journal's resend holds them
        return self.journal.resume(push_to_talk=self.push_to_talk, speech_only=self.speech_only)

    def resume_turns(self, *, handover: bool, released_while_away: bool) -> tuple[list[Pcm], Pcm]:
        """:meth:`resume` as turns: each push-to-talk turn let go while away, whole (to commit, or to send as
        items, on its own), and the rest (a turn still held, or audio no release has ended) to go on after them."""
        resumed = self.resume(handover=handover)
        if resumed is None:
            return [], np.zeros(0, np.int16)
        ends = list(self.journal.released_at)
        if released_while_away and not self.talking and (not ends or ends[-1] < len(resumed)):
            ends.append(len(resumed))  # let go for good: all of it is turns
        bounds = [0]
        for end in ends:
            if end - bounds[-1] >= MIN_TURN_SAMPLES:
                bounds.append(end)
            elif len(bounds) > 1:  # too short to commit on its own (a tap after a turn): it ends that turn
                bounds[-1] = end
        turns = [resumed[begin:end] for begin, end in zip(bounds, bounds[1:])]
        return turns, resumed[bounds[-1]:]


ITEM_ENVELOPE_BYTES = 256  # a user audio item's event around its audio: type, ids, role, content part


def audio_items(pcm: Pcm, limit: int, new_id: Callable[[], str]) -> list[tuple[dict[str, Any], Pcm]]:
    """``pcm`` as user audio items in a row (``conversation.item.create`` payloads), each event at most ``limit``
    bytes; with the samples each carries."""
    data = np.ascontiguousarray(pcm, dtype="<i2").tobytes()
    return [(payload, np.frombuffer(piece, "<i2"))
            for payload, piece in user_audio_creates(data, limit - ITEM_ENVELOPE_BYTES, iter(new_id, None))]
