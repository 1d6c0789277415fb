"""Input transcripts, scripted or heard, and responses that wait for what the user said.

- A committed user audio item in a session that asks for input transcription gets the
  scenario's scripted line if there is one (scripts win). Otherwise, with a recogniser
  (``EngineConfig.hearing``), it becomes a :class:`~.hearing.HearingJob`; so does every user audio
  item of a scenario that listens, transcription asked for or not. Without either it gets
  ``…input_audio_transcription.failed``, as the server did before it could hear.
- Heard words stream as ``…input_audio_transcription.delta`` events, one a word, then
  ``.completed`` with the usage the service reports for the session's transcription model
  (``duration`` seconds for ``whisper-1``, tokens for the others), and become the item's
  transcript.
- A response that would take a listening turn while the newest user item is still being heard
  is deferred (nothing is sent) until its words arrive or recognition fails; the user speaking
  again (``speech_started`` with ``interrupt_response``) or ``response.cancel`` drops it. A
  response already under way is never held up: recognition runs beside it.
"""

from __future__ import annotations

from typing import Any

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.conversation import Entry
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.hearing import HearingJob
from voxline.realtime.server.engine.ids import event
from voxline.realtime.server.engine.planner import check_params, peek_turn, start_response
from voxline.realtime.server.engine.state import SessionState
from voxline.realtime.server.engine.usage import audio_tokens, text_tokens

__all__ = ["after_commit", "cancel_deferred", "heard", "respond", "take"]

_PREFIX = "conversation.item.input_audio_transcription"


def after_commit(state: SessionState, entry: Entry, item_id: str, audio: bytes) -> list[dict[str, Any]]:
    """The transcription side of committing user audio ``item_id``: a script, a hearing job, or ``.failed``.

    ``audio`` is what was committed: a conversation that keeps only lengths has let go of it already."""
    turn, state.user_turns = state.user_turns, state.user_turns + 1
    script = state.scenario.user_says
    transcribing = state.session.transcription is not None
    if transcribing and turn < len(script):
        entry.item["content"][0]["transcript"] = script[turn]
        return transcript_events(state, item_id, script[turn], entry.audio_ms(0) / 1000.0)
    if state.hearing.enabled and (transcribing or state.scenario.listens):
        state.hearing.waiting.append(HearingJob(item_id, bytes(audio), entry.fmt, state.scenario.phrases))
        return []
    if transcribing:
        message = "The voxline local server does not transcribe speech here: no transcript is scripted and no recogniser is installed (voxline[asr])."
        return [_failed(state, item_id, "transcription_unavailable", message)]
    return []


def take(state: SessionState) -> list[HearingJob]:
    """The jobs waiting for the recogniser, now in flight."""
    jobs, state.hearing.waiting = state.hearing.waiting, []
    state.hearing.in_flight.update(job.item_id for job in jobs)
    return jobs


def heard(state: SessionState, item_id: str, text: str | None, now: float) -> list[dict[str, Any]]:
    """The recogniser's words for ``item_id`` (``None``: it failed); a deferred response starts."""
    if item_id not in state.hearing.in_flight:
        return []  # never asked, or already answered
    state.hearing.in_flight.discard(item_id)
    entry = state.conversation.get(item_id)
    events: list[dict[str, Any]] = []
    if entry is not None and state.session.transcription is not None:
        if text is None:
            events.append(_failed(state, item_id, "transcription_failed", "The audio could not be transcribed."))
        else:
            entry.item["content"][0]["transcript"] = text
            events.extend(transcript_events(state, item_id, text, entry.audio_ms(0) / 1000.0))
    elif entry is not None and text is not None:
        entry.item["content"][0]["transcript"] = text  # a listening scenario hears without transcribing
    if state.hearing.deferred is not None and not _still_hearing(state):
        params, state.hearing.deferred = state.hearing.deferred, None
        if state.default_run() is None:
            events.extend(start_response(state, params, now))
    return events


def respond(state: SessionState, params: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """Start a default-conversation response, or defer it while the words it depends on are heard."""
    check_params(state, params)
    if params.get("conversation", "auto") != "none" and _waits(state):
        if state.hearing.deferred is not None:
            raise RequestRejected(errors.active_response("(waiting for the user's words)"))
        state.hearing.deferred = params
        return []
    return start_response(state, params, now)


def cancel_deferred(state: SessionState) -> bool:
    """Drop a deferred response; whether there was one."""
    dropped = state.hearing.deferred is not None
    state.hearing.deferred = None
    return dropped


def transcript_events(state: SessionState, item_id: str, text: str, seconds: float) -> list[dict[str, Any]]:
    """``text`` streamed word by word, then ``.completed`` with the model's kind of usage."""
    words = text.split(" ")
    deltas = [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]
    events = [event(state.ids, f"{_PREFIX}.delta", item_id=item_id, content_index=0, delta=d) for d in deltas if d]
    events.append(event(state.ids, f"{_PREFIX}.completed", item_id=item_id, content_index=0, transcript=text,
                        usage=_usage(state, text, seconds)))
    return events


def _usage(state: SessionState, text: str, seconds: float) -> dict[str, Any]:
    model = (state.session.transcription or {}).get("model")
    if model in (None, "whisper-1"):
        return {"type": "duration", "seconds": round(seconds, 3)}
    audio_in, text_out = audio_tokens(seconds, output=False), text_tokens(text) if text else 0
    return {"type": "tokens", "input_tokens": audio_in, "output_tokens": text_out, "total_tokens": audio_in + text_out,
            "input_token_details": {"audio_tokens": audio_in, "text_tokens": 0}}


def _failed(state: SessionState, item_id: str, code: str, message: str) -> dict[str, Any]:
    failure = {"type": "invalid_request_error", "code": code, "message": message, "param": None}
    return event(state.ids, f"{_PREFIX}.failed", item_id=item_id, content_index=0, error=failure)


def _still_hearing(state: SessionState) -> bool:
    newest = _newest_user_audio(state)
    return newest is not None and state.hearing.pending(newest)


def _waits(state: SessionState) -> bool:
    """A listening turn is next and the newest user audio item is still being heard."""
    last = state.conversation.get(state.conversation.last_id) if state.conversation.last_id else None
    after_due = isinstance(state.pending_after, tuple) and last is not None and last.item.get("type") == "function_call_output"
    return not after_due and bool(peek_turn(state).branches) and _still_hearing(state)


def _newest_user_audio(state: SessionState) -> str | None:
    for entry in reversed(list(state.conversation)):
        if entry.item.get("role") == "user":
            content = entry.item.get("content") or []
            return str(entry.item["id"]) if any(p.get("type") == "input_audio" for p in content) else None
    return None
