"""The conversation mirror: the client's copy of the server conversation (docs/design.md §6).

Pure and synchronous: :meth:`ConversationMirror.apply` takes protocol outputs (typed
server events; anything else is ignored) and keeps the items in server order with their
text, audio received, cut points, tool calls and outputs. The session also reports its
barge-ins (:meth:`~ConversationMirror.apply_barge_in`), so the mirror knows what the
listener heard. From that it plans the commands that rebuild the conversation on a new
connection (:mod:`.rebuild`) and saves itself as plain JSON (:mod:`.state`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from voxline.realtime import events as ev
from voxline.realtime.notices import CommandFailed
from voxline.base.audio_format import output_format_of
from voxline.base.ordered import keep_newest
from voxline.realtime.protocol import ProtocolOutput

from ..events import BargeIn
from .due import DueDeltas
from .merge import item_id_of, merge_item, new_record
from .order import ItemOrder
from .rebuild import AudioLookup, Rebuild, plan_rebuild
from .records import MirrorItem, MirrorPart
from .state import MirrorState, read_state, write_state
from .wire_audio import PCM_BYTES_PER_MS, b64_decoded_length

__all__ = ["ConversationMirror"]

DELETED_KEPT = 256
"""Deleted items a mirror keeps (:meth:`ConversationMirror.deleted`), the newest: enough to know a late event
about one, and bounded for a session of days."""
FORGOTTEN_KEPT = 256
"""Ids of items a mirror let go (past its bound, or left out of a rebuild) that it remembers, the newest: a late
event about one is ignored rather than putting it back last."""
_PENDING_RESPONSES = 512  # item → response ids remembered for items not added yet


class ConversationMirror:
    """Items of one conversation, in server order, across connections."""

    def __init__(self) -> None:
        self._order = ItemOrder()
        self._deleted: dict[str, MirrorItem] = {}
        self._forgotten: dict[str, None] = {}  # items let go, not deleted (the newest FORGOTTEN_KEPT)
        self._pending_deletes: dict[str, None] = {}
        self._response_of: dict[str, str] = {}
        self._bytes_per_ms = PCM_BYTES_PER_MS
        self._due = DueDeltas()  # a reply's audio and transcript deltas, not in the records yet (:mod:`.due`)

    def _settle(self) -> None:
        if self._due:
            self._due.settle(self._order)

    # -- reading ------------------------------------------------------------------------

    def items(self) -> list[MirrorItem]:
        """A snapshot of the live items, in server order."""
        self._settle()
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._order

    def get(self, item_id: str) -> MirrorItem | None:
        """The live item ``item_id``, or ``None`` (deleted items are in :meth:`deleted`)."""
        self._settle()
        return self._order.get(item_id)

    def deleted(self) -> list[MirrorItem]:
        """Items the server deleted (``deleted=True``), in the order they went: the newest :data:`DELETED_KEPT`."""
        return list(self._deleted.values())

    @property
    def pending_deletes(self) -> tuple[str, ...]:
        """Ids a barge-in deleted whose ``conversation.item.deleted`` has not arrived yet."""
        return tuple(self._pending_deletes)

    @property
    def bytes_per_ms(self) -> float:
        """Bytes per millisecond of the session's output audio (48 for PCM16 24 kHz, 8 for G.711)."""
        return self._bytes_per_ms

    # -- the session's reports ----------------------------------------------------------

    def apply_barge_in(self, barge_in: BargeIn) -> None:
        """Record a barge-in: the heard ms of the cut item, and the items it deleted.

        Deleted items are left out of a rebuild at once, before the server confirms.
        """
        self._settle()
        for item_id in barge_in.deleted:
            if item_id in self._order:
                self._pending_deletes[item_id] = None
        if barge_in.trigger == "connection_lost":  # no truncate reaches the server: every part counts
            for part_item, _index, heard_ms in barge_in.heard_parts:
                if part_item not in barge_in.deleted:
                    self.record_heard(part_item, heard_ms)
        cut_id = barge_in.item_id
        if cut_id is None or cut_id in barge_in.deleted:
            return
        # over WebRTC (the server cuts its own buffer) the item's length is the session's estimate
        known = self._order.get(cut_id) if barge_in.server_cuts else None
        estimated = known is not None and known.audio_ms_received > 0
        if barge_in.received_ms <= 0 and barge_in.audio_end_ms is None and not estimated:
            return  # the session knew nothing about that item's audio
        self.record_heard(cut_id, barge_in.heard_ms, barge_in.received_ms)

    def record_heard(self, item_id: str, heard_ms: float, received_ms: float | None = None) -> None:
        """The listener heard ``heard_ms`` of ``item_id`` and will hear no more of it.

        For a barge-in, or a connection lost while an item played. ``received_ms`` (what
        the playout had received) raises ``audio_ms_received`` when the mirror saw less,
        e.g. over WebRTC, where audio does not come as events.
        """
        self._settle()
        item = self._order.get(item_id)
        if item is None:
            return
        received = max(item.audio_ms_received, received_ms or 0.0)
        self._order.replace(dataclasses.replace(item, heard_ms=max(0.0, heard_ms), audio_ms_received=received))

    def record_audio(self, item_id: str, audio_ms: float) -> None:
        """``item_id`` has about ``audio_ms`` of audio in all, where it does not come as events.

        Over WebRTC the audio plays on a media track and the data channel never says how long
        an item is; the session's estimate (:meth:`voxline.session.track_audio.TrackTagger.audio_estimates`) stands in,
        so a cut item's heard text is the share of its transcript the listener heard.
        """
        self._settle()
        item = self._order.get(item_id)
        if item is not None and audio_ms > item.audio_ms_received:
            self._order.replace(dataclasses.replace(item, audio_ms_received=audio_ms))

    def record_local(self, event: ev.ConversationItemCreate) -> None:
        """An item this client is creating (``conversation.item.create`` with an ``item.id``).

        It takes its place at once, unconfirmed, so a connection lost before the server's echo
        does not lose it: a rebuild recreates it. The echo confirms it; a refusal removes it.
        """
        item_id = item_id_of(event.item)
        if item_id is None or item_id in self._order:
            return
        self._settle()
        previous = event.previous_item_id
        if previous is None:  # the service appends it
            last = self._order.last_id()
            previous = last if last is not None else "root"
        self._place(dataclasses.replace(new_record(event.item, item_id), confirmed=False), previous)

    # -- server events ------------------------------------------------------------------

    def apply(self, event: ProtocolOutput) -> None:
        """Update the mirror from one protocol output; outputs that say nothing about items are ignored.

        Audio deltas, and transcript deltas of an item's only text part, are held aside
        (:class:`~.due.DueDeltas`); any other event (and any read) first folds them into the
        records, so no delta of a reply's bulk replaces a record.
        """
        if isinstance(event, ev.ResponseOutputAudioDelta):  # the bulk of a reply: first, before any other test
            self._on_audio(event)
            return
        if isinstance(event, ev.ResponseOutputAudioTranscriptDelta):
            item = self._order.get(event.item_id)
            if item is not None and self._due.add_transcript(item, event.content_index, event.delta):
                return
        self._settle()
        match event:
            case ev.ConversationItemDone() if self._gone(item_id_of(event.item)):
                pass  # the generation of an item deleted meanwhile (a reply cut before it was heard) ended: still gone
            case ev.ConversationItemAdded() | ev.ConversationItemDone() | ev.ConversationItemCreated():
                self._on_item(event.item, event.previous_item_id)
            case ev.ConversationItemRetrieved():
                self._update(event.item, None)
            case ev.ResponseOutputItemAdded():
                self._note_response(item_id_of(event.item), event.response_id)
            case ev.ResponseOutputItemDone():
                self._update(event.item, event.response_id)
            case ev.ResponseDone():
                for output in event.response.output or []:
                    self._update(output, event.response.id)
            case ev.ConversationItemDeleted():
                self._on_deleted(event.item_id)
            case ev.ConversationItemTruncated():
                self._edit(event.item_id, lambda i: dataclasses.replace(i, truncated=True, cut_ms=event.audio_end_ms))
            case ev.ConversationItemInputAudioTranscriptionDelta():
                self._text(event.item_id, event.content_index or 0, "input_audio", event.delta or "", append=True)
            case ev.ConversationItemInputAudioTranscriptionCompleted():
                self._text(event.item_id, event.content_index, "input_audio", event.transcript)
            case ev.ResponseOutputAudioTranscriptDelta():
                self._note_response(event.item_id, event.response_id)
                self._mark(event.item_id)
                self._text(event.item_id, event.content_index, "output_audio", event.delta, append=True)
            case ev.ResponseOutputTextDelta():
                self._note_response(event.item_id, event.response_id)
                self._text(event.item_id, event.content_index, "output_text", event.delta, append=True)
            case ev.ResponseOutputAudioTranscriptDone():
                self._text(event.item_id, event.content_index, "output_audio", event.transcript)
            case ev.ResponseOutputTextDone():
                self._text(event.item_id, event.content_index, "output_text", event.text)
            case ev.ResponseContentPartAdded() | ev.ResponseContentPartDone():
                self._on_part(event)
            case ev.ResponseFunctionCallArgumentsDelta():
                self._note_response(event.item_id, event.response_id)
                self._edit(event.item_id, lambda i: i if i.arguments_done else
                           dataclasses.replace(i, arguments=i.arguments + event.delta))
            case ev.ResponseFunctionCallArgumentsDone():
                self._note_response(event.item_id, event.response_id)
                self._edit(event.item_id, lambda i: dataclasses.replace(
                    i, arguments=event.arguments, arguments_done=True, name=event.name, call_id=event.call_id))
            case ev.InputAudioBufferCommitted():
                self._on_committed(event.item_id, event.previous_item_id)
            case ev.SessionCreated() | ev.SessionUpdated():
                named = output_format_of(event.session.audio)
                self._bytes_per_ms = named.bytes_per_ms if named is not None else self._bytes_per_ms
            case CommandFailed(command_type="conversation.item.create"):
                self._on_refused(event.command)
            case _:
                pass

    def _on_committed(self, item_id: str, previous_item_id: str | None) -> None:
        """The server's VAD committed a user turn: its item takes its place now, unconfirmed.

        A connection lost before ``conversation.item.added`` would otherwise lose the turn; the
        rebuild sends its audio (kept by the session's input journal).
        """
        if item_id and item_id not in self._order:
            record = MirrorItem(item_id, "message", "message", role="user", status="completed",
                                parts=(MirrorPart(type="input_audio"),), confirmed=False)
            self._place(record, previous_item_id)

    def _on_refused(self, command: dict[str, Any] | None) -> None:
        """The server refused a create: an item of ours it never echoed is not in the conversation."""
        item_id = ((command or {}).get("item") or {}).get("id")
        item = self._order.get(item_id) if isinstance(item_id, str) else None
        if item is not None and not item.confirmed:
            self._order.remove(item.id)

    def _on_item(self, item: ev.Item, previous_item_id: str | None) -> None:
        """``conversation.item.added``/``.done``: a new item takes its place; a known one is updated."""
        item_id = item_id_of(item)
        if item_id is None:
            return
        old = self._order.get(item_id)
        if old is not None:
            self._order.replace(dataclasses.replace(merge_item(old, item), confirmed=True))
            return
        if item_id in self._forgotten:  # a late word about an item let go: it does not come back, last
            return
        record = new_record(item, item_id)
        response_id = self._response_of.pop(item_id, None)
        if response_id is not None:
            record = dataclasses.replace(record, response_id=response_id)
        self._place(record, previous_item_id)

    def _place(self, record: MirrorItem, previous_item_id: str | None) -> None:
        """A new item in its place; the oldest let go past the bound is forgotten."""
        evicted = self._order.place(record, previous_item_id)
        if evicted is not None:
            self._forget([evicted])

    def _forget(self, item_ids: list[str]) -> None:
        """Items let go (past the bound, or left out of a rebuild): a barge-in's delete of one no longer waits, and a
        late event about one is ignored (the newest :data:`FORGOTTEN_KEPT` are known; not saved by :meth:`to_json`)."""
        for item_id in item_ids:
            self._pending_deletes.pop(item_id, None)
            self._forgotten[item_id] = None
        keep_newest(self._forgotten, FORGOTTEN_KEPT)

    def _update(self, item: ev.Item, response_id: str | None) -> None:
        """An item's latest copy from a response or a retrieve; only items in the conversation count."""
        item_id = item_id_of(item)
        if item_id is None:
            return
        if response_id is not None:
            self._note_response(item_id, response_id)
        self._edit(item_id, lambda old: merge_item(old, item))

    def _note_response(self, item_id: str | None, response_id: str) -> None:
        if item_id is None:
            return
        item = self._order.get(item_id)
        if item is None:
            self._response_of[item_id] = response_id
            keep_newest(self._response_of, _PENDING_RESPONSES)
        elif item.response_id is None:
            self._order.replace(dataclasses.replace(item, response_id=response_id))

    def _gone(self, item_id: str | None) -> bool:
        """Deleted by the server, or let go by this mirror, and not created again since."""
        return (item_id is not None and (item_id in self._deleted or item_id in self._forgotten)
                and item_id not in self._order)

    def _on_deleted(self, item_id: str) -> None:
        item = self._order.remove(item_id)
        self._pending_deletes.pop(item_id, None)
        if item is not None:
            self._deleted[item_id] = dataclasses.replace(item, deleted=True)
            keep_newest(self._deleted, DELETED_KEPT)  # a session of days deletes without end

    def _edit(self, item_id: str, change: Callable[[MirrorItem], MirrorItem]) -> None:
        item = self._order.get(item_id)
        if item is not None:
            self._order.replace(change(item))

    def _edit_part(self, item_id: str, index: int, default_type: str, change: Callable[[MirrorPart], MirrorPart]) -> None:
        """Change content part ``index`` of a live, uncut item (parts up to it are made as needed)."""
        item = self._order.get(item_id)
        if item is None or item.frozen or index < 0:
            return
        parts = list(item.parts) + [MirrorPart() for _ in range(index + 1 - len(item.parts))]
        part = parts[index]
        parts[index] = change(part if part.type else dataclasses.replace(part, type=default_type))
        self._order.replace(dataclasses.replace(item, parts=tuple(parts)))

    def _text(self, item_id: str, index: int, default_type: str, text: str, *, append: bool = False) -> None:
        """Transcript or text of one part: deltas accumulate, ``.done``/``.completed`` replace."""
        self._edit_part(
            item_id, index, default_type,
            lambda p: dataclasses.replace(p, text=p.text + text if append else text),
        )

    def _mark(self, item_id: str) -> None:
        """A transcript delta is about to arrive: note where it starts and how much audio had come."""
        self._edit(item_id, lambda i: i if i.frozen else dataclasses.replace(
            i, text_marks=(*i.text_marks, (len(i.text), i.audio_ms_received))))

    def _on_part(self, event: ev.ResponseContentPartAdded | ev.ResponseContentPartDone) -> None:
        """``response.content_part.added``/``.done``: the part's type, and its text when given."""
        self._note_response(event.item_id, event.response_id)
        wire = event.part
        text = wire.text if wire.text is not None else wire.transcript
        default = "output_audio" if wire.type in ("audio", "output_audio") else "output_text"
        self._edit_part(
            event.item_id, event.content_index, default,
            lambda p: dataclasses.replace(p, text=text or p.text),
        )

    def _on_audio(self, event: ev.ResponseOutputAudioDelta) -> None:
        """``response.output_audio.delta``: count the audio received for the item."""
        self._note_response(event.item_id, event.response_id)
        item = self._order.get(event.item_id)
        if item is None or item.frozen:
            return
        index = event.content_index
        if index >= len(item.parts) or not item.parts[index].type:  # the part is made once, on its first delta
            self._edit_part(event.item_id, index, "output_audio", lambda p: p)
        ms = b64_decoded_length(event.delta) / self._bytes_per_ms
        self._due.add_audio(event.item_id, ms)

    # -- rebuild ------------------------------------------------------------------------

    def plan_rebuild(self, audio_of: AudioLookup | None = None, *, max_event_bytes: int | None = None,
                     new_id: Callable[[], str] | None = None, keep: int | None = None,
                     hold: frozenset[str] = frozenset()) -> Rebuild:
        """The commands that recreate this conversation in a fresh session, and what they leave out.

        ``audio_of`` gives the user's audio of items whose transcript never came; ``max_event_bytes`` and
        ``new_id`` size the items for the new connection; ``keep`` rebuilds the newest items only, reaching back
        to the items in ``hold`` (see :mod:`.rebuild`).
        """
        return plan_rebuild(self.items(), frozenset(self._pending_deletes), audio_of, max_event_bytes=max_event_bytes,
                            new_id=new_id, keep=keep, hold=hold)

    def rebuild_commands(self) -> list[dict[str, Any]]:
        """``conversation.item.create`` payloads, in order (see :func:`.rebuild.plan_rebuild`)."""
        return list(self.plan_rebuild().commands)

    def adopt_rebuild(self, rebuild: Rebuild) -> None:
        """``rebuild`` was sent on a new connection: the live items now match the new server's.

        Its skipped items are gone from the conversation (they move to :meth:`deleted`); the older items it left
        out are forgotten (the new conversation begins after them); a message sent as several is those messages,
        unconfirmed until their echoes come (the first under its id, as plain text: a reply cut before is now the
        text that was heard), so a later rebuild sends each once, as it is.
        """
        self._settle()
        self._forget(self._order.drop_oldest(rebuild.older))
        for skipped in rebuild.skipped:
            self._on_deleted(skipped.item_id)
        for item_id, commands in rebuild.split_texts:
            old = self._order.get(item_id)
            if old is None:
                continue
            previous = item_id
            for command in commands:
                create = ev.parse_client_dict(command)
                assert isinstance(create, ev.ConversationItemCreate)
                piece_id = item_id_of(create.item)
                assert piece_id is not None
                record = dataclasses.replace(new_record(create.item, piece_id), confirmed=False,
                                             response_id=old.response_id)
                self._place(record, previous)  # the first replaces the message in place
                previous = piece_id

    # -- persistence --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The whole mirror as plain JSON types (with a ``version``)."""
        state = MirrorState(
            version=1,
            bytes_per_ms=self._bytes_per_ms,
            items=self.items(),
            deleted=self.deleted(),
            pending_deletes=list(self._pending_deletes),
            response_of=dict(self._response_of),
        )
        data = state.model_dump(mode="json")
        for record, item in zip(data["items"], state.items, strict=True):
            heard = item.heard
            record["heard_text"] = heard.text  # derived, for readers; ignored when read back
            record["heard_text_method"] = heard.method
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConversationMirror:
        """A mirror continuing from :meth:`to_json`; :class:`~voxline.realtime.errors.ConfigurationError` if invalid."""
        state = MirrorState.parse(data)
        mirror = cls()
        mirror._bytes_per_ms = state.bytes_per_ms
        mirror._pending_deletes = dict.fromkeys(state.pending_deletes)  # before the items: one let go takes its own
        mirror._forget([gone for item in state.items if (gone := mirror._order.append(item)) is not None])
        mirror._deleted = {item.id: item for item in state.deleted[-DELETED_KEPT:]}
        mirror._response_of = dict(state.response_of)
        return mirror

    def export(self, path: str | Path) -> None:
        """Write :meth:`to_json` to ``path`` (UTF-8 JSON, replaced atomically)."""
        write_state(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> ConversationMirror:
        """A mirror read back from a file written by :meth:`export`."""
        return cls.from_json(read_state(Path(path)))

    def apply_all(self, events: Iterable[ProtocolOutput]) -> None:
        """:meth:`apply` each event in turn."""
        for event in events:
            self.apply(event)
