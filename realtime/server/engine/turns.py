"""User turns: ``input_audio_buffer.*`` and what server VAD does with them.

- ``append`` feeds the VAD; ``speech_started`` carries ``audio_start_ms`` (with the
  prefix padding) and the id the user item will get; with ``interrupt_response``
  the active default-conversation response is cancelled (``turn_detected``).
- ``speech_stopped`` carries ``audio_end_ms``; the speech segment is committed
  (``input_audio_buffer.committed`` + ``conversation.item.added`` / ``.done``) and,
  with ``create_response``, a response starts unless one is already active.
- ``commit`` refuses less than 100 ms (``input_audio_buffer_commit_empty``).
- ``idle_timeout_ms`` fires ``input_audio_buffer.timeout_triggered`` that long after
  ``response.done`` plus the response's audio playback time, commits the buffer
  and starts a response.
- Each committed item is transcribed from the scenario's ``user_says`` script or heard by the
  driver's recogniser, and a response that depends on its words may wait for them
  (:mod:`voxline.realtime.server.engine.listening`).
"""

from __future__ import annotations

from typing import Any

from voxline.realtime.server.engine import errors, listening
from voxline.realtime.server.engine.conversation import Entry
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.ids import event
from voxline.realtime.server.engine.input_audio import SpeechStart, SpeechStop
from voxline.realtime.server.engine.state import SessionState

__all__ = ["append_audio", "arm_idle", "clear", "commit", "fire_idle"]


def append_audio(state: SessionState, data: bytes, now: float) -> list[dict[str, Any]]:
    """``input_audio_buffer.append``: buffer the audio and act on VAD events."""
    events: list[dict[str, Any]] = []
    for vad_event in state.input.append(data):
        match vad_event:
            case SpeechStart():
                events.extend(_speech_started(state, vad_event))
            case SpeechStop():
                events.extend(_speech_stopped(state, vad_event, now))
    return events


def _speech_started(state: SessionState, start: SpeechStart) -> list[dict[str, Any]]:
    state.speech_item = state.ids.new("item")
    state.speech_start = start.start
    state.idle_deadline = None
    events = [
        event(
            state.ids,
            "input_audio_buffer.speech_started",
            audio_start_ms=state.input.ms(start.start),
            item_id=state.speech_item,
        )
    ]
    detection = state.session.turn_detection or {}
    run = state.default_run()
    if detection.get("interrupt_response", True):
        listening.cancel_deferred(state)
        if run is not None:
            events.extend(run.cancel("turn_detected"))
    return events


def _speech_stopped(state: SessionState, stop: SpeechStop, now: float) -> list[dict[str, Any]]:
    item_id = state.speech_item or state.ids.new("item")
    state.speech_item = None
    events = [
        event(state.ids, "input_audio_buffer.speech_stopped", audio_end_ms=state.input.ms(stop.end), item_id=item_id)
    ]
    events.extend(_commit_audio(state, state.input.take_segment(state.speech_start, stop.end), item_id))
    detection = state.session.turn_detection or {}
    responds = detection.get("create_response", True) and not state.config.transcription
    if responds and state.default_run() is None and state.hearing.deferred is None:
        events.extend(listening.respond(state, {}, now))
    return events


def commit(state: SessionState) -> list[dict[str, Any]]:
    """``input_audio_buffer.commit``: the whole buffer becomes a user item."""
    if state.input.buffered_ms < 100.0:
        raise RequestRejected(errors.commit_empty(state.input.buffered_ms))
    item_id = state.speech_item or state.ids.new("item")
    state.speech_item = None
    state.idle_deadline = None
    return _commit_audio(state, state.input.take_all(), item_id)


def clear(state: SessionState) -> list[dict[str, Any]]:
    """``input_audio_buffer.clear``."""
    state.input.clear()
    state.speech_item = None
    return [event(state.ids, "input_audio_buffer.cleared")]


def arm_idle(state: SessionState, now: float, audio_s: float) -> None:
    """After a default-conversation ``response.done``: start the idle timer if configured."""
    detection = state.session.turn_detection
    idle_ms = detection.get("idle_timeout_ms") if detection and detection["type"] == "server_vad" else None
    state.idle_deadline = None if idle_ms is None else now + audio_s + idle_ms / 1000.0


def fire_idle(state: SessionState, now: float) -> list[dict[str, Any]]:
    """The idle timeout elapsed: ``timeout_triggered``, commit, respond."""
    state.idle_deadline = None
    item_id = state.speech_item or state.ids.new("item")
    state.speech_item = None
    start_ms, end_ms = state.input.ms(state.input.buffer_start), state.input.ms(state.input.position)
    events = [
        event(
            state.ids,
            "input_audio_buffer.timeout_triggered",
            audio_start_ms=start_ms,
            audio_end_ms=end_ms,
            item_id=item_id,
        )
    ]
    events.extend(_commit_audio(state, state.input.take_all(), item_id))
    if state.default_run() is None and state.hearing.deferred is None and not state.config.transcription:
        events.extend(listening.respond(state, {}, now))
    return events


def _commit_audio(state: SessionState, audio: bytes, item_id: str) -> list[dict[str, Any]]:
    item = {
        "id": item_id,
        "type": "message",
        "object": "realtime.item",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": None}],
    }
    entry = Entry(item, {0: [bytes(audio)]}, fmt=state.input.format)
    previous = state.conversation.insert(entry)
    events = [
        event(state.ids, "input_audio_buffer.committed", previous_item_id=previous, item_id=item_id),
        event(state.ids, "conversation.item.added", previous_item_id=previous, item=entry.public()),
        event(state.ids, "conversation.item.done", previous_item_id=previous, item=entry.public()),
    ]
    events.extend(listening.after_commit(state, entry, item_id, audio))  # the bytes, kept or not by the item
    return events
