"""What the microphone said, kept until the server has it for good (sans-I/O).

The server's input audio buffer lives and dies with its connection. A question the user was
asking when the connection dropped, or a turn the server committed but never transcribed,
would be lost with it. :class:`InputJournal` keeps:

* the recent audio captured for the connection, on one sample timeline, so that after a
  drop the new connection gets again what the user was saying (:meth:`resume`): from the
  earliest ``speech_started`` not yet committed when speech was under way or had stopped
  without being committed, all of the uncommitted turn in push-to-talk, or otherwise all that
  was captured since the server last spoke, after a short lead-in (speech the server may never
  have had: said during the drop, or into a network that stalled before it was given up);
* the audio of each committed user turn (from ``speech_started`` to ``speech_stopped``),
  until its transcript arrives: the rebuild then uses the text, and the audio only when no
  transcript ever came (:meth:`audio_of`).

A ``speech_started``'s ``audio_start_ms`` is where the audio the server gives its model begins:
the prefix padding is already in it, so the journal takes nothing more off.

The server counts ``audio_start_ms``/``audio_end_ms`` from the first sample of *its*
connection; :meth:`resume` moves that origin to the first sample sent again. Memory is
bounded: ``keep_s`` seconds of uncommitted audio, ``turns_s`` seconds of committed turns
(oldest forgotten first).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime import events as ev
from voxline.realtime.protocol import ProtocolOutput

__all__ = ["TRACK_MARGIN_MS", "InputJournal"]

TRACK_MARGIN_MS = 200
"""Over a call's media track the server counts its milliseconds on the track's clock. The journal counts the track's
filler too (:meth:`InputJournal.padded`), but learns of it only with the next block, and the track sends a frame
behind the blocks: speech under way is resent from this much earlier than where the server says it began."""

Pcm = npt.NDArray[np.int16]
_SILENCE = np.zeros(1, np.int16)


class InputJournal:
    """See the module docstring. ``padding_ms`` is the server VAD's ``prefix_padding_ms``: the lead-in is never
    shorter."""

    def __init__(self, *, padding_ms: int = 300, lead_in_ms: int = 500, keep_s: float = 30.0,
                 turns_s: float = 120.0, rate: int = SAMPLE_RATE) -> None:
        self.rate = rate
        self.track_margin = TRACK_MARGIN_MS * rate // 1000
        self.lead_in = max(lead_in_ms, padding_ms) * rate // 1000
        self.keep = int(keep_s * rate)
        self.turns_budget = int(turns_s * rate)
        # the blocks held, from index _head on: each starts where the one before ended
        self._starts: list[int] = []  # absolute start sample of each block
        self._pcm: list[Pcm] = []
        self._head = 0
        self._total = 0  # samples captured so far
        self._origin = 0  # absolute sample at the server's 0 ms on this connection
        self._commit_point = 0  # first sample not in a committed (or cleared) turn
        self._speech_start: int | None = None
        self._speech_end: int | None = None
        self._heard_mark = 0  # samples captured when the server last spoke: what it may not have had begins after
        self._carried = False  # the start marked is an earlier connection's: this one's own start replaces it
        self._clears_sent = 0  # clears sent on this connection whose ``cleared`` has not come back
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._turn_samples = 0
        self._turn_ends: list[int] = []  # where push-to-talk turns were let go while away
        self.released_at: tuple[int, ...] = ()
        """After :meth:`resume`: where in its audio each push-to-talk turn let go while away ended (samples)."""

    # -- input --------------------------------------------------------------------------

    def captured(self, block: Pcm) -> None:
        """One block of microphone audio meant for the server (sent now, or after a reconnect)."""
        self._keep(np.ascontiguousarray(block, dtype=np.int16).reshape(-1))

    def _keep(self, pcm: Pcm) -> None:
        if not len(pcm):
            return
        self._starts.append(self._total)
        self._pcm.append(pcm)
        self._total += len(pcm)
        floor = self._total - self.keep
        self._commit_point = max(self._commit_point, floor)
        self._trim(floor)

    def padded(self, samples: int) -> None:
        """Silence a media track sent between two blocks, for want of one in time: the server counts it as
        said, so it takes its place on the timeline too (no more of it is held than :attr:`keep`)."""
        if samples <= 0:
            return
        if samples > self.keep:  # older than anything kept: only its length counts
            self._total += samples - self.keep
            samples = self.keep
        self._keep(np.broadcast_to(_SILENCE, (samples,)))  # a view of one sample: no memory of its own

    def handle(self, output: ProtocolOutput) -> None:
        """Follow the server's view of the input buffer."""
        self._heard_mark = self._total  # it spoke: it was there (what it was sent before, it had, or would say so)
        match output:
            case ev.InputAudioBufferSpeechStarted():
                start = self._at(output.audio_start_ms)
                if self._speech_start is not None and start is not None and not self._carried:
                    start = min(start, self._speech_start)  # the turn begun before on this connection goes on
                self._speech_start = start
                self._speech_end = None
                self._carried = False
            case ev.InputAudioBufferSpeechStopped():
                self._speech_end = self._at(output.audio_end_ms)
            case ev.InputAudioBufferCommitted():
                self._commit(output.item_id)
            case ev.InputAudioBufferCleared():
                if self._clears_sent:  # the reply to our clear: applied when it was sent, what came after is kept
                    self._clears_sent -= 1
                else:  # a clear of someone else's (a sideband's)
                    self._clear()
            case ev.ConversationItemInputAudioTranscriptionCompleted():
                if output.transcript:
                    self._forget(output.item_id)
            case ev.ConversationItemDeleted():
                self._forget(output.item_id)
            case _:
                pass

    def clear_sent(self) -> None:
        """``input_audio_buffer.clear`` sent (push-to-talk pressed): what was captured so far is gone for the server,
        and what is captured from now on is the new turn, though the server's ``cleared`` comes a round trip later."""
        self._clears_sent += 1
        self._clear()

    def _clear(self) -> None:
        self._turn_ends.clear()
        self._commit_point = self._total
        self._speech_start = self._speech_end = None
        self._trim(self._commit_point)

    # -- after a drop -------------------------------------------------------------------

    def resume(self, *, push_to_talk: bool, speech_only: bool = False) -> Pcm:
        """The audio to send again on a new connection, which counts its milliseconds from it.

        ``speech_only``: a call's media track with the server's VAD. What is resent goes as user
        audio items, which no VAD hears: only speech the server noticed (from :data:`TRACK_MARGIN_MS`
        before where it began), never a lead-in; the new call counts from the next sample
        its track sends."""
        if self._speech_start is not None:  # speech under way, or stopped but not yet committed
            start = self._speech_start - (self.track_margin if speech_only else 0)
        elif push_to_talk:
            start = self._commit_point
        elif speech_only:
            start = self._total
        else:  # a lead-in before what the server may never have had: all since it last spoke (a drop, a stall)
            start = self._heard_mark - self.lead_in
        start = max(start, self._commit_point, self._total - self._held, 0)
        # speech under way stays marked: a connection lost again resends it again, until the new one says where
        # its own speech starts (if it never hears speech in it, its next start is no continuation of the mark)
        self._carried = self._speech_start is not None
        self._clears_sent = 0  # their replies went with the old connection
        self._origin = self._total if speech_only else start
        ends, self._turn_ends = self._turn_ends, []
        self.released_at = tuple(dict.fromkeys(end - start for end in ends if start < end <= self._total))
        return self._slice(start, self._total)

    def drop_last(self, samples: int) -> None:
        """The last ``samples`` captured were never said to the server and never will be (a push-to-talk tap let go
        while away, too short to commit): gone from the timeline, as if not captured."""
        samples = max(0, min(samples, self._held))
        self._total -= samples
        while samples and self._head < len(self._starts):
            last = self._pcm[-1]
            if len(last) <= samples:
                samples -= len(last)
                self._pcm.pop()
                self._starts.pop()
            else:
                self._pcm[-1] = last[: len(last) - samples]
                samples = 0
        self._head = min(self._head, len(self._starts))
        total = self._total
        self._commit_point = min(self._commit_point, total)
        self._heard_mark = min(self._heard_mark, total)
        self._turn_ends = [end for end in self._turn_ends if end <= total]
        if self._speech_start is not None and self._speech_start > total:
            self._speech_start = self._speech_end = None
        elif self._speech_end is not None:
            self._speech_end = min(self._speech_end, total)

    def turn_ended(self) -> None:
        """Push-to-talk let go while away: what comes after is the next turn."""
        self._turn_ends.append(self._total)

    def restart(self, *, unsent: int = 0) -> None:
        """A new connection that is sent nothing again (a hand-over at a turn boundary).

        ``unsent``: the last samples captured, not sent yet; the new connection starts with them.
        """
        self._origin = self._total - max(0, min(unsent, self._total))
        self._clears_sent = 0
        self._speech_start = self._speech_end = None

    def resent_as_items(self, items: list[tuple[str, Pcm]]) -> None:
        """What :meth:`resume` gave was sent as user audio items (a call's track takes no audio from before
        it): the turn so far is committed, each part kept under its item's id until its transcript comes."""
        for item_id, pcm in items:
            self._remember(item_id, _Turn([pcm], len(pcm)))
        self._commit_point = self._total
        self._speech_start = self._speech_end = None
        self._trim(self._commit_point)

    def audio_of(self, item_id: str) -> bytes | None:
        """The PCM16 audio of a committed user turn still waiting for its transcript."""
        turn = self._turns.get(item_id)
        return _joined(turn.parts).astype("<i2").tobytes() if turn is not None else None

    def sizes(self) -> dict[str, int]:
        """Samples held, the blocks they are in (with those forgotten but not yet let go of), committed turns."""
        return {"held": self._held, "blocks": len(self._starts), "turns": len(self._turns),
                "turn_samples": self._turn_samples}

    # -- internals ----------------------------------------------------------------------

    @property
    def _held(self) -> int:
        """Samples in the blocks held."""
        return self._total - self._starts[self._head] if self._head < len(self._starts) else 0

    def _at(self, ms: int | None) -> int | None:
        if ms is None:
            return None
        return self._origin + max(0, int(ms)) * self.rate // 1000

    def _commit(self, item_id: str | None) -> None:
        # the server may place the end past what is held: a track's filler is counted with the block after it
        end = min(self._speech_end if self._speech_end is not None else self._total, self._total)
        if self._speech_start is not None:
            start = max(self._commit_point, self._speech_start)
        else:
            start = self._commit_point
        if item_id and end > start:
            self._remember(item_id, _Turn(self._parts(start, end), end - start))
        self._commit_point = max(self._commit_point, end)
        self._speech_start = self._speech_end = None
        self._trim(self._commit_point)

    def _trim(self, floor: int) -> None:
        """Forget blocks wholly before ``floor`` (nothing before the commit point is sent again)."""
        head = max(self._head, bisect.bisect_right(self._starts, floor, lo=self._head) - 1)
        if head < len(self._starts) and self._starts[head] + len(self._pcm[head]) <= floor:
            head += 1  # the block that starts last at or before the floor ends there too
        self._head = head
        if head > 64 and head * 2 > len(self._starts):  # the forgotten half goes at once
            del self._starts[:head], self._pcm[:head]
            self._head = 0

    def _remember(self, item_id: str, turn: _Turn) -> None:
        self._forget(item_id)
        self._turns[item_id] = turn
        self._turn_samples += turn.samples
        while self._turn_samples > self.turns_budget and len(self._turns) > 1:
            _old, dropped = self._turns.popitem(last=False)
            self._turn_samples -= dropped.samples

    def _forget(self, item_id: str | None) -> None:
        if item_id is not None and (turn := self._turns.pop(item_id, None)) is not None:
            self._turn_samples -= turn.samples

    def _slice(self, start: int, end: int) -> Pcm:
        return _joined(self._parts(start, end))

    def _parts(self, start: int, end: int) -> list[Pcm]:
        """Views of the held blocks between two absolute samples (no copy)."""
        starts, pcm, parts = self._starts, self._pcm, []
        for i in range(max(self._head, bisect.bisect_right(starts, start, lo=self._head) - 1), len(starts)):
            at = starts[i]
            if at >= end:
                break
            block = pcm[i]
            if at + len(block) > start:
                parts.append(block[max(0, start - at):end - at])
        return parts


class _Turn(NamedTuple):
    """A committed turn's audio as views of the blocks it was captured in: joined only if it is needed."""

    parts: list[Pcm]
    samples: int


def _joined(parts: list[Pcm]) -> Pcm:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
