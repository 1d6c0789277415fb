"""Barge-in planning: from what the listener heard to the commands that cut the conversation.

Pure and synchronous (docs/design.md §5). The caller stops playout first and reads the
heard ledger; :func:`plan_barge_in` then decides, per assistant audio item of the
interrupted response:

* heard part of it → ``conversation.item.truncate`` at the heard milliseconds, never above
  what was received;
* heard none of it (less than 1 ms) → ``conversation.item.delete``;
* heard all of it and it is complete → nothing to cut.

``response.cancel`` is needed only while a response is active and the server will not
cancel it itself (server VAD with ``interrupt_response`` cancels on speech start).
Over WebRTC the server owns the output buffer: cancel + ``output_audio_buffer.clear``, no
truncate (docs/protocol.md §8).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime import events as ev

__all__ = ["BargeInPlan", "CutPart", "OutputOwner", "Trigger", "heard_ms_for_truncate", "plan_barge_in"]


class Trigger(enum.Enum):
    SERVER_VAD = "server_vad"  # input_audio_buffer.speech_started
    LOCAL_VAD = "local_vad"
    INTERRUPT = "interrupt"  # VoiceSession.interrupt()
    CONNECTION_LOST = "connection_lost"  # the connection dropped while the assistant was audible


class OutputOwner(enum.Enum):
    """Who holds the assistant audio not yet played: the client (WebSocket) or the server (WebRTC)."""

    CLIENT = "client"  # audio deltas are queued here: truncate at what was heard
    SERVER = "server"  # the server's output buffer plays a media track: cancel and clear it


@dataclass(frozen=True, slots=True)
class CutPart:
    """One assistant audio part of the interrupted response, as the ledger saw it."""

    item_id: str
    content_index: int
    heard_samples: int
    received_samples: int
    complete: bool  # response.output_audio.done was received for it


@dataclass(frozen=True, slots=True)
class BargeInPlan:
    truncate: tuple[tuple[str, int, int], ...]  # (item_id, content_index, audio_end_ms)
    delete: tuple[str, ...]
    cancel: bool
    clear_output_buffer: bool

    @property
    def empty(self) -> bool:
        return not (self.truncate or self.delete or self.cancel or self.clear_output_buffer)

    def commands(self) -> Iterator[ev.ClientEvent]:
        """The client events of the plan, in the order they are sent."""
        for item_id, content_index, audio_end_ms in self.truncate:
            yield ev.ConversationItemTruncate(item_id=item_id, content_index=content_index, audio_end_ms=audio_end_ms)
        for item_id in self.delete:
            yield ev.ConversationItemDelete(item_id=item_id)
        if self.cancel:
            yield ev.ResponseCancel()
        if self.clear_output_buffer:
            yield ev.OutputAudioBufferClear()


def heard_ms_for_truncate(heard_samples: int, received_samples: int) -> int:
    """Whole milliseconds to keep: what was heard, never more than what was received."""
    return min(heard_samples, received_samples) * 1000 // SAMPLE_RATE


def plan_barge_in(
    items: list[CutPart],
    *,
    response_active: bool,
    server_cancels: bool,
    trigger: Trigger,
    owner: OutputOwner = OutputOwner.CLIENT,
    server_playing: bool = False,
) -> BargeInPlan:
    """Decide the commands for one barge-in. ``items`` are in response order.

    ``server_playing`` (WebRTC) is true between ``output_audio_buffer.started`` and
    ``.stopped``/``.cleared``: the server's buffer may hold audio after the response is done.
    """
    server_acts = trigger is Trigger.SERVER_VAD and server_cancels  # it cancels and clears by itself
    cancel = response_active and not server_acts
    if owner is OutputOwner.SERVER:
        clear = (response_active or server_playing) and not server_acts
        return BargeInPlan((), (), cancel=cancel, clear_output_buffer=clear)
    truncate: list[tuple[str, int, int]] = []
    delete: list[str] = []
    for item in items:
        keep_ms = heard_ms_for_truncate(item.heard_samples, item.received_samples)
        if keep_ms <= 0:
            delete.append(item.item_id)
        elif item.heard_samples < item.received_samples or not item.complete:
            truncate.append((item.item_id, item.content_index, keep_ms))
    return BargeInPlan(tuple(truncate), tuple(dict.fromkeys(delete)), cancel=cancel, clear_output_buffer=False)
