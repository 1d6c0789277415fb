"""The playout buffer: assistant audio queued by item, played by the output, cut on barge-in.

Every queued sample is tagged with its ``(item_id, content_index)`` and its offset in that
item. :meth:`PlayoutBuffer.read` fills the output's next block and records in the
:class:`~voxline.audio.ledger.HeardLedger` when each tagged run reaches the listener; the ledger
then answers "how much of item X had the listener heard at instant t" (the heard rule is
in :mod:`voxline.audio.ledger`). Times are floats in seconds on the output's timeline, passed in by
the caller: nothing here reads a clock.

**Barge-in.** :meth:`PlayoutBuffer.interrupt` ``(at, fade_ms)`` with ``end = at + fade``:

* samples already returned and heard at ``at`` stay heard;
* samples in ``(at, end]`` count as heard and fade out linearly: those not yet returned
  are taken from the queue, faded and handed out by the next :meth:`read` (the *tail*);
  those already returned were not faded here (the output may fade them, see
  :meth:`voxline.audio.sinks.WavSink.apply_cut`);
* everything returned with a listener time after ``end`` is revoked from the ledger: the
  output must discard it (abort the device stream, overwrite the file);
* the queue is flushed and the interrupted items are closed: later :meth:`enqueue` calls
  for them are dropped (late deltas of a cancelled response).

The tail is handed out only if the next read continues the timeline where the last one
ended (within half a sample). If the output restarts elsewhere the tail is dropped; the
part of it before the new block stays counted as heard (at most ``fade_ms``, counted as
heard by design), the part the new block overlaps is revoked.

**Underruns.** Silence handed out while an item is still streaming (enqueued, not yet
marked complete with :meth:`PlayoutBuffer.mark_complete`) once its audio began to play is an
underrun; silence after the last item is complete, before its audio began, or after a cut is idle.
Enqueuing a new item completes the previous one implicitly.

**Lead.** Audio that arrives in real time (a WebRTC track) can play only as fast as it comes: its
packets and the output's reads meet a few milliseconds apart, and each time the reads win there
is a gap. With :attr:`PlayoutBuffer.lead` set, a streaming part plays once that many samples of
it wait, it is complete, or its first samples waited as long as the lead lasts (a reply shorter
than the lead whose packets then stop), at its start and again after the queue ran dry; what is
heard is counted as ever, only later.

**Threads.** :meth:`read` / :meth:`read_into` run on the audio thread; everything else on
the event loop. One ``threading.Lock`` guards the state; under it ``read`` copies at most
``n`` samples and appends or extends one ledger segment per item run; ``enqueue`` copies
its input (unless it is a read-only view of ``bytes``, which nothing can change) before taking the lock, ``interrupt`` builds a tail of at most ``fade`` samples.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxline.audio.reference import PlayedRing
from voxline.audio.ledger import Cut, HeardItem, HeardLedger, ItemKey, Playing, fade_gains, heard_count
from voxline.base.arguments import real, whole
from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["PlayoutBuffer"]

Samples = npt.NDArray[np.int16]


@dataclass(slots=True, eq=False)
class _Chunk:
    key: ItemKey
    samples: Samples
    offset: int  # item offset of samples[0]
    pos: int = 0  # samples already handed out


_FREE_PER_READ = 2  # flushed chunks freed per read: 200 ms of 100 ms deltas per 20 ms block, well past the cut


class PlayoutBuffer:
    """Tagged FIFO of assistant audio in front of an output, with its heard ledger."""

    def __init__(self, rate: int = SAMPLE_RATE) -> None:
        self.rate = whole(rate, "rate", low=1)
        self._lock = threading.Lock()
        self._ledger = HeardLedger(rate)
        self._queue: deque[_Chunk] = deque()
        self._queued = 0
        self._queue_keys: dict[ItemKey, int] = {}  # chunks queued per part: a cut closes them without a walk
        self._spent: deque[deque[_Chunk]] = deque()  # flushed by a cut, freed a few chunks per read
        self._received: dict[ItemKey, int] = {}
        self._complete: set[ItemKey] = set()
        self._closed: set[ItemKey] = set()
        self._closed_items: set[str] = set()
        self._open: ItemKey | None = None
        self._starved = False
        self._next_time: float | None = None  # listener time right after the last sample handed out
        self._tail: Samples | None = None
        self._tail_time = 0.0
        self._underrun_events = 0
        self._underrun_samples = 0
        self._samples_played = 0
        self._samples_read = 0
        self._late_samples = 0
        self._tail_dropped = 0
        self._held = False
        self.lead = 0
        """Samples of a streaming part gathered before it plays, at its start and again after it ran dry: a jitter
        buffer for audio that arrives in real time (a WebRTC track), whose packets and the output's reads would
        otherwise meet a few milliseconds apart, each time a gap. 0 (audio that arrives ahead of time, as deltas
        do) plays at once."""
        self._gathering = True  # the queue ran dry: nothing plays until ``lead`` samples wait, or no part streams
        self._waited = 0  # samples read while gathering with audio queued: at ``lead`` it plays what there is
        self._last_key: ItemKey | None = None  # the part the last sample handed out belongs to
        self._reference: PlayedRing | None = None
        self.before_change: Callable[[], None] | None = None
        """Called before audio is queued or an echo reference attached, on the event loop's side: the output
        that reads this buffer catches up first if it skipped reads while nothing could play
        (:class:`~voxline.audio.clocked_output.ClockedOutput`)."""

    # -- event-loop side: feeding ------------------------------------------------------

    def enqueue(self, samples: npt.ArrayLike, item_id: str, content_index: int = 0) -> bool:
        """Queue a 1-D int16 run of an item's audio (``response.output_audio.delta``).

        Returns False when the item was cut or discarded: the samples count as received
        (they arrived) but are not played.
        """
        array = np.asarray(samples)
        if array.dtype != np.int16 or array.ndim != 1:
            raise TypeError(f"expected a 1-D int16 array, got {array.dtype} with shape {array.shape}")
        if self.before_change is not None:
            self.before_change()
        # a read-only view of a bytes object (a decoded server delta) cannot change: keep it as is
        data = array if isinstance(array.base, bytes) and not array.flags.writeable else array.copy()
        key = (item_id, content_index)
        with self._lock:
            offset = self._received.get(key, 0)
            self._received[key] = offset + len(data)
            if key in self._closed or item_id in self._closed_items:
                self._late_samples += len(data)
                return False
            if len(data):
                self._queue.append(_Chunk(key, data, offset))
                self._queued += len(data)
                self._queue_keys[key] = self._queue_keys.get(key, 0) + 1
            if key not in self._complete:
                self._open = key
            return True

    def mark_complete(self, item_id: str, content_index: int = 0) -> None:
        """No more audio will come for this part (``response.output_audio.done``)."""
        key = (item_id, content_index)
        with self._lock:
            self._complete.add(key)
            if self._open == key:
                self._open = None

    def discard_item(self, item_id: str) -> int:
        """Drop the queued samples of every part of ``item_id`` and refuse later ones."""
        with self._lock:
            kept = deque(chunk for chunk in self._queue if chunk.key[0] != item_id)
            dropped = self._queued - sum(len(c.samples) - c.pos for c in kept)
            self._queue, self._queued = kept, self._queued - dropped
            self._queue_keys = {k: n for k, n in self._queue_keys.items() if k[0] != item_id}
            self._closed_items.add(item_id)
            if self._open is not None and self._open[0] == item_id:
                self._open = None
            return dropped

    def clear(self) -> int:
        """Drop every queued sample (a pending fade tail still plays); returns how many."""
        with self._lock:
            dropped = self._queued
            self._queue.clear()
            self._queued = 0
            self._queue_keys.clear()
            self._open = None
            self._starved = False
            return dropped

    # -- audio-thread side: playing ----------------------------------------------------

    def read(self, n: int, play_time: float) -> Samples:
        """The next ``n`` samples; the first reaches the listener at ``play_time``."""
        out = np.empty(max(n, 0), dtype=np.int16)
        self.read_into(out, play_time)
        return out

    def read_into(self, out: npt.NDArray[np.int16], play_time: float) -> None:
        """Fill ``out`` (1-D int16, any stride) in place; silence where nothing is queued.

        Never blocks on anything but the short internal lock and never raises for a
        1-D int16 ``out`` and a finite ``play_time``.
        """
        n = len(out)
        if not math.isfinite(play_time):  # before anything is counted: the ledger keeps only real times
            raise ValueError(f"play_time takes a finite time, not {play_time}")
        with self._lock:
            tail = self._tail
            pos = 0 if tail is None else self._emit_tail(tail, out, play_time)
            queue = self._queue
            if self._gathering and (self._queued >= self.lead or self._open is None or self._waited >= self.lead):
                self._gathering = False
            while pos < n and queue and not self._held and not self._gathering:
                chunk = queue[0]
                take = min(n - pos, len(chunk.samples) - chunk.pos)
                out[pos : pos + take] = chunk.samples[chunk.pos : chunk.pos + take]
                self._ledger.record(chunk.key, chunk.offset + chunk.pos, take, play_time + pos / self.rate)
                self._last_key = chunk.key
                chunk.pos += take
                pos += take
                self._queued -= take
                if chunk.pos == len(chunk.samples):
                    self._pop_chunk()
            if not queue:  # ran dry, or a part ended: the next audio gathers its lead
                self._gathering, self._waited = True, 0
            elif self._gathering and not self._held:
                self._waited += n
            self._account(pos, n)
            if self._spent:
                self._free_spent()
            if pos < n:
                out[pos:] = 0
            self._next_time = play_time + n / self.rate
        if self._reference is not None:
            self._reference.write(play_time, out)

    @property
    def idle(self) -> bool:
        """True when a read could only give silence and would change nothing but the read position: nothing
        queued, open, fading or to free, and no echo reference to feed (see :meth:`skip_silence`)."""
        with self._lock:
            return not (self._tail is not None or self._queue or self._open is not None or self._spent
                        or self._reference is not None)

    def skip_silence(self, n: int, play_time: float) -> bool:
        """:meth:`read_into` of ``n`` samples when it could only give silence, without a buffer to fill.

        True when nothing at all is pending (no fade tail, no queued or open audio, nothing to
        free, no reference to feed): the read is accounted as :meth:`read_into` would. False,
        with nothing done, otherwise: the caller reads.
        """
        if not math.isfinite(play_time):
            return False  # :meth:`read_into` refuses it
        with self._lock:
            if (self._tail is not None or self._queue or self._open is not None or self._spent
                    or self._reference is not None):  # (as idle: one lock, not two)
                return False
            self._samples_read += n
            self._next_time = play_time + n / self.rate
            return True

    def _emit_tail(self, tail: Samples, out: npt.NDArray[np.int16], play_time: float) -> int:
        """Hand out the pending fade tail if this block continues the timeline."""
        if abs(play_time - self._tail_time) > 0.5 / self.rate:
            # The output restarted elsewhere: the tail stays counted as heard, except the
            # part the new block now covers, which was never played.
            self._ledger.revoke_after(max(play_time, self._tail_time) - 1.0 / self.rate)
            self._tail_dropped += len(tail)
            self._tail = None
            return 0
        take = min(len(out), len(tail))
        out[:take] = tail[:take]
        rest = tail[take:]
        self._tail = rest if len(rest) else None
        self._tail_time = play_time + take / self.rate
        return take

    def _account(self, played: int, n: int) -> None:
        self._samples_read += n
        self._samples_played += played
        if played:
            self._starved = False
        if played < n and self._open is not None and self._open == self._last_key and not self._held:
            if not self._starved:
                self._underrun_events += 1
                self._starved = True
            self._underrun_samples += n - played

    # -- event-loop side: hold, reference ------------------------------------------------

    def hold(self) -> None:
        """Play silence from the next read on, keeping the queue (a pause, not a cut).

        The ledger stops where the listener is, so :meth:`release` resumes at the exact
        heard point, and a later :meth:`interrupt` cuts there. Silence while held is not
        an underrun.
        """
        with self._lock:
            self._held = True

    def release(self) -> None:
        """Resume playing the queue after :meth:`hold`."""
        with self._lock:
            self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def attach_reference(self, ring: PlayedRing | None) -> None:
        """Copy every block handed out into ``ring`` at its listener time (the echo reference)."""
        if self.before_change is not None:
            self.before_change()
        self._reference = ring

    @property
    def reference(self) -> PlayedRing | None:
        return self._reference

    # -- event-loop side: barge-in -----------------------------------------------------

    def interrupt(self, at: float, fade_ms: float = 5.0) -> Cut:
        """Stop playout at listener time ``at`` with a fade of ``fade_ms``; see the module doc.

        ``at`` is on the timeline of ``play_time`` (for a device: the stream's current time
        when the barge-in is handled). Afterwards ``heard_samples(..., at=math.inf)`` of
        every interrupted item equals its count at ``cut.end`` and never grows again.
        """
        real(at, "at")
        fade = real(fade_ms, "fade_ms", low=0) / 1000
        end = at + fade
        with self._lock:
            ledger = self._ledger
            self._held = False
            playing = ledger.playing_at(at)
            revoked = ledger.revoke_after(end)
            if self._reference is not None and revoked:
                self._reference.revoke_after(end)
            self._trim_pending_tail(end)
            tail = self._take_tail(at, end) if playing is not None and fade > 0 else 0
            fade_samples = ledger.heard_between(at, end)
            flushed = self._flush_and_close(playing, revoked)
            current = playing if playing is not None else ledger.last_heard(at)
            if current is None:
                return Cut(None, 0, 0, 0, False, at, end, fade_samples, tail, sum(revoked.values()), flushed, self.rate)
            key = (current.item_id, current.content_index)
            return Cut(
                item_id=current.item_id,
                content_index=current.content_index,
                heard_samples=ledger.heard_samples(*key, end),
                received_samples=self._received.get(key, 0),
                playing=playing is not None,
                at=at,
                end=end,
                fade_samples=fade_samples,
                tail_samples=tail,
                revoked_samples=sum(revoked.values()),
                flushed_samples=flushed,
                rate=self.rate,
            )

    def _trim_pending_tail(self, end: float) -> None:
        """A tail still pending from an earlier cut keeps only what is heard by ``end``."""
        if self._tail is not None:
            keep = heard_count(self._tail_time, len(self._tail), end, self.rate)
            self._tail = self._tail[:keep] if keep else None

    def _take_tail(self, at: float, end: float) -> int:
        """Move the queued samples of the slots up to ``end`` into a faded tail; record them."""
        if self._next_time is None:
            return 0
        pending = self._tail
        start = self._tail_time if pending is not None else self._next_time
        first = start + (len(pending) if pending is not None else 0) / self.rate
        k = heard_count(first, self._queued, end, self.rate)
        if k == 0:
            return 0
        tail = np.empty(k, dtype=np.int16)
        pos = 0
        while pos < k:
            chunk = self._queue[0]
            take = min(k - pos, len(chunk.samples) - chunk.pos)
            tail[pos : pos + take] = chunk.samples[chunk.pos : chunk.pos + take]
            self._ledger.record(chunk.key, chunk.offset + chunk.pos, take, first + pos / self.rate)
            chunk.pos += take
            pos += take
            if chunk.pos == len(chunk.samples):
                self._pop_chunk()
        self._queued -= k
        times = first + np.arange(k) / self.rate
        faded = np.rint(tail * fade_gains(times, at, end, self.rate)).astype(np.int16)
        self._tail = faded if pending is None else np.concatenate([pending, faded])
        self._tail_time = start
        return k

    def _pop_chunk(self) -> None:
        key = self._queue.popleft().key
        left = self._queue_keys[key] - 1
        if left:
            self._queue_keys[key] = left
        else:
            del self._queue_keys[key]

    def _free_spent(self) -> None:
        """Let go of a few chunks a cut flushed: a cut itself frees none, however much was queued."""
        spent = self._spent[0]
        for _ in range(min(_FREE_PER_READ, len(spent))):
            spent.pop()
        if not spent:
            self._spent.popleft()

    def _flush_and_close(self, playing: Playing | None, revoked: dict[ItemKey, int]) -> int:
        """Empty the queue; close every item part this playout was about.

        The flushed chunks are freed by the reads that follow (:data:`_FREE_PER_READ` each), so
        a barge-in's cost does not grow with the audio it discards.
        """
        closing = set(self._queue_keys) | set(revoked)
        if playing is not None:
            closing.add((playing.item_id, playing.content_index))
        if self._open is not None:
            closing.add(self._open)
        self._closed |= closing
        flushed = self._queued
        if self._queue:
            self._spent.append(self._queue)
            self._queue = deque()
        self._queued = 0
        self._queue_keys = {}
        self._open = None
        self._starved = False
        return flushed

    # -- queries (any thread) ----------------------------------------------------------

    def last_heard(self, at: float) -> Playing | None:
        """The most recent item sample heard at ``at`` (see :meth:`HeardLedger.last_heard`)."""
        with self._lock:
            return self._ledger.last_heard(at)

    def heard_samples(self, item_id: str, content_index: int, at: float) -> int:
        """Samples of the part heard at listener time ``at`` (:mod:`voxline.audio.ledger` heard rule)."""
        with self._lock:
            return self._ledger.heard_samples(item_id, content_index, at)

    def started_at(self, item_id: str, content_index: int = 0) -> float | None:
        """Listener time of the part's first sample (see :meth:`HeardLedger.started_at`)."""
        with self._lock:
            return self._ledger.started_at(item_id, content_index)

    def heard_ms(self, item_id: str, content_index: int, at: float) -> float:
        return self.heard_samples(item_id, content_index, at) * 1000 / self.rate

    def playing_at(self, at: float) -> Playing | None:
        """``(item_id, content_index, offset_samples)`` at the listener at ``at``, or None."""
        with self._lock:
            return self._ledger.playing_at(at)

    def audio_until(self) -> float:
        """Listener time the item audio handed out so far ends (-inf before any)."""
        with self._lock:
            return self._ledger.audio_end()

    @property
    def next_time(self) -> float | None:
        """Listener time right after the last sample handed out, silence included (None before any read)."""
        return self._next_time

    def queued_parts(self) -> list[ItemKey]:
        """The parts with samples queued, oldest first."""
        with self._lock:
            return list(self._queue_keys)

    def received_samples(self, item_id: str, content_index: int = 0) -> int:
        with self._lock:
            return self._received.get((item_id, content_index), 0)

    def heard_items(self, at: float, item_ids: set[str] | frozenset[str] | None = None) -> list[HeardItem]:
        """Every known part (or those of ``item_ids``) in order of arrival, heard at ``at``."""
        with self._lock:
            return [
                HeardItem(
                    key[0], key[1], self._ledger.heard_samples(*key, at), received, key in self._complete, self.rate
                )
                for key, received in self._received.items()
                if item_ids is None or key[0] in item_ids
            ]

    def prune(self, before: float) -> None:
        """Summarise ledger segments wholly heard by ``before`` (see :meth:`HeardLedger.prune`)."""
        with self._lock:
            self._ledger.prune(before)

    def forget(self, item_id: str) -> None:
        """Drop all bookkeeping of ``item_id`` once the conversation no longer needs it."""
        with self._lock:
            self._forget(item_id)

    def retire(self, at: float) -> list[str]:
        """Forget every item that can no longer be cut at listener time ``at`` or later.

        An item is retired once a later part has been heard and everything of it that will
        ever play has been heard at ``at``: it played to its end, or it was cut and its fade
        is over. The part heard last stays, so a barge-in in the silence after it still
        names it. Returns the ids forgotten, oldest first.
        """
        with self._lock:
            latest = self._ledger.last_heard(at)
            order = list(self._received)
            key = None if latest is None else (latest.item_id, latest.content_index)
            if key not in self._received:
                return []
            index = order.index(key)
            keep = {k[0] for k in order[index:]} | {key[0] for key in self._queue_keys}
            if self._open is not None:
                keep.add(self._open[0])
            unheard = {k[0] for k in order[:index] if not self._ledger.wholly_heard(*k, at)}
            retired = [i for i in dict.fromkeys(k[0] for k in order[:index]) if i not in keep | unheard]
            for item_id in retired:
                self._forget(item_id)
            return retired

    def _forget(self, item_id: str) -> None:
        self._ledger.forget(item_id)
        self._received = {k: v for k, v in self._received.items() if k[0] != item_id}
        self._complete = {k for k in self._complete if k[0] != item_id}
        self._closed = {k for k in self._closed if k[0] != item_id}
        self._closed_items.discard(item_id)

    def sizes(self) -> dict[str, int]:
        """Entries per bookkeeping table (the ledger's prefixed ``ledger_``), to check memory stays bounded."""
        with self._lock:
            own = {
                "received": len(self._received),
                "complete": len(self._complete),
                "closed": len(self._closed),
                "closed_items": len(self._closed_items),
                "queue_chunks": len(self._queue),
                "spent_chunks": sum(map(len, self._spent)),
            }
            return own | {f"ledger_{name}": n for name, n in self._ledger.sizes().items()}

    @property
    def ledger(self) -> HeardLedger:
        """The ledger itself: unlocked, safe to read only while no output is reading."""
        return self._ledger

    @property
    def queued_samples(self) -> int:
        return self._queued

    @property
    def pending_tail_samples(self) -> int:
        tail = self._tail
        return 0 if tail is None else len(tail)

    @property
    def underrun_events(self) -> int:
        return self._underrun_events

    @property
    def underrun_samples(self) -> int:
        return self._underrun_samples

    @property
    def samples_played(self) -> int:
        """Item samples handed out (the fade tail included), before any revocation."""
        return self._samples_played

    @property
    def samples_read(self) -> int:
        """All samples handed out, silence included."""
        return self._samples_read

    @property
    def late_samples(self) -> int:
        """Samples enqueued for a cut or discarded item, and therefore not played."""
        return self._late_samples

    @property
    def tail_dropped_samples(self) -> int:
        """Fade-tail samples not handed out because the output did not continue in time."""
        return self._tail_dropped
