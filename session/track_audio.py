"""WebRTC: tag the assistant audio arriving on the remote track with the item it belongs to.

Over WebRTC the audio comes as a media track, not as ``response.output_audio.delta``
events, and the server owns the output buffer (docs/protocol.md §2, §8). The data channel says when
the server starts and stops playing a response (``output_audio_buffer.started`` /
``.stopped`` / ``.cleared``); :class:`TrackTagger` uses that to queue track audio into the
playout, so the heard ledger, the session's state and its barge-in reports work as they do
over WebSocket.

Nothing on the data channel says where one item's audio ends and the next one's begins, nor
how long an item's audio is: a reply of several audio items plays as one stream. The tagger
therefore *estimates* each item's length from its transcript (which arrives at generation
speed, ahead of the audio) at the session's speaking rate (:class:`SpeakingRate`, learned from
replies that played to their end; 65 ms a character until then) and moves on to the next
item of the response once that much audio went to the current one. The last item takes the
rest. The same estimate is each item's audio length for the mirror's heard-text estimate
(:meth:`TrackTagger.audio_estimates`); the cut itself is the server's (it truncates every
item at what it played).

``.stopped`` can arrive before the last frames, which sit in the network jitter buffer:
audio keeps being tagged for a grace of ``grace_ms`` of samples after it. Counting is in
samples; nothing reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.base.audio_format import SAMPLE_RATE as RATE
from voxline.realtime import events as ev
from voxline.realtime.protocol import ProtocolOutput

__all__ = ["TRACK_LEAD_MS", "SpeakingRate", "TrackTagger", "gather_track_lead"]

TRACK_LEAD_MS = 60
"""The playout's lead for audio on a media track (:attr:`~voxline.audio.playout.PlayoutBuffer.lead`): it comes in
20 ms packets at the pace it plays, and without a few packets in hand every late one is a gap."""


def gather_track_lead(playout: PlayoutBuffer) -> None:
    """Set ``playout`` to gather :data:`TRACK_LEAD_MS` of a part before playing it: its audio comes on a track."""
    playout.lead = TRACK_LEAD_MS * playout.rate // 1000

_RESPONSES = 16  # responses whose items are remembered
DEFAULT_MS_PER_CHAR = 65.0  # about 15 characters a second, a typical synthetic voice's pace
_MIN_CHARS = 40  # a rate is learned from at least this much transcript


class SpeakingRate:
    """Milliseconds of speech per transcript character, from replies heard to their end."""

    def __init__(self, default_ms_per_char: float = DEFAULT_MS_PER_CHAR) -> None:
        self._default = default_ms_per_char
        self._samples = 0
        self._chars = 0

    @property
    def ms_per_char(self) -> float:
        if self._chars < _MIN_CHARS or self._samples <= 0:
            return self._default
        return self._samples * 1000.0 / RATE / self._chars

    def learn(self, samples: int, chars: int) -> None:
        """A reply of ``chars`` transcript characters played ``samples`` of audio, uncut."""
        if samples > 0 and chars > 0:
            self._samples += samples
            self._chars += chars

    def samples_for(self, chars: int) -> int:
        return int(chars * self.ms_per_char * RATE / 1000.0)


@dataclass(slots=True)
class _Item:
    item_id: str
    chars: int = 0
    done: bool = False  # its transcript is complete
    tagged: int = 0  # track samples attributed to it


class TrackTagger:
    """Feeds remote-track audio into a playout buffer, tagged by the server's playback state."""

    def __init__(self, playout: PlayoutBuffer, *, grace_ms: float = 300.0, rate: SpeakingRate | None = None) -> None:
        self.playout = playout
        self.rate = rate if rate is not None else SpeakingRate()
        self._grace = int(grace_ms * RATE / 1000)
        self._responses: dict[str, list[_Item]] = {}  # response id → its assistant message items, in order
        self._items: dict[str, _Item] = {}
        self._playing: list[_Item] | None = None  # the items of the response on the track
        self._index = 0
        self._current: str | None = None  # the id audio is tagged with now
        self._left: int | None = None  # samples still tagged after .stopped (None: playing)
        self.server_playing = False

    @property
    def audible(self) -> bool:
        """True while track audio is being attributed to an item."""
        return self._current is not None

    def handle(self, output: ProtocolOutput) -> None:
        match output:
            case ev.ResponseOutputItemAdded() if isinstance(output.item, ev.MessageItem) and output.item.id:
                self._add(output.response_id, output.item.id)
            case ev.ResponseOutputAudioTranscriptDelta():
                item = self._items.get(output.item_id)
                if item is not None and not item.done:
                    item.chars += len(output.delta)
            case ev.ResponseOutputAudioTranscriptDone():
                item = self._items.get(output.item_id)
                if item is not None:
                    item.chars, item.done = len(output.transcript), True
            case ev.OutputAudioBufferStarted():
                self._playing = self._responses.get(output.response_id)
                self._index = 0
                self._current = self._playing[0].item_id if self._playing else output.response_id
                self._left = None
                self.server_playing = True
            case ev.OutputAudioBufferStopped():
                self._left = self._grace
                self.server_playing = False
            case ev.OutputAudioBufferCleared():
                self._finish(heard_to_the_end=False)
                self.server_playing = False
            case _:
                pass

    def on_audio(self, block: np.ndarray) -> None:
        """The remote track's callback: int16 mono 24 kHz blocks."""
        if self._current is None:
            return
        start = 0
        while start < len(block):
            room = self._room()
            end = len(block) if room is None else start + min(room, len(block) - start)
            if end > start:
                self.playout.enqueue(block[start:end], self._current, 0)
                if self._playing:
                    self._playing[self._index].tagged += end - start
                start = end
            if room is not None and start < len(block) or room == 0:
                self._next_item()
        if self._left is not None:
            self._left -= len(block)
            if self._left <= 0:
                self._finish(heard_to_the_end=True)

    def audio_estimates(self) -> list[tuple[str, float]]:
        """(item id, ms of audio it has, estimated) for the items of the responses remembered.

        At least what went to it on the track, and at least what its transcript so far takes at
        the speaking rate: the transcript runs ahead of the audio, so an item cut early has far
        more words received than heard, and its heard share is of that longer whole."""
        out = []
        for item in self._items.values():
            estimate = max(item.tagged, self.rate.samples_for(item.chars))
            if estimate > 0:
                out.append((item.item_id, estimate * 1000.0 / RATE))
        return out

    def _add(self, response_id: str, item_id: str) -> None:
        items = self._responses.setdefault(response_id, [])
        if item_id not in self._items:
            item = _Item(item_id)
            items.append(item)
            self._items[item_id] = item
        while len(self._responses) > _RESPONSES:  # only recent responses can still start playing
            for old in self._responses.pop(next(iter(self._responses))):
                self._items.pop(old.item_id, None)

    def _room(self) -> int | None:
        """Samples the current item may still take before the next item's turn (None: no limit)."""
        items = self._playing
        if not items or self._index + 1 >= len(items):
            return None
        item = items[self._index]
        if not item.done or not item.chars:
            return None  # its transcript is still coming (or says nothing): its length is not known
        return max(0, self.rate.samples_for(item.chars) - item.tagged)

    def _next_item(self) -> None:
        assert self._playing is not None and self._current is not None
        self.playout.mark_complete(self._current, 0)
        self._index += 1
        self._current = self._playing[self._index].item_id

    def _finish(self, *, heard_to_the_end: bool) -> None:
        if heard_to_the_end and self._playing and all(item.done for item in self._playing):
            self.rate.learn(sum(item.tagged for item in self._playing), sum(item.chars for item in self._playing))
        if self._current is not None:
            self.playout.mark_complete(self._current, 0)
        self._current, self._left, self._playing, self._index = None, None, None, 0
