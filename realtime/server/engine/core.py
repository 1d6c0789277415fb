"""The local server's sans-I/O engine: client frames in, server events (dicts) out.

One :class:`Engine` per connection. It reads no clock and does no I/O: every call
takes ``now`` (seconds on the server's clock) and returns the events to send, in
order. Responses stream on a schedule: the app asks :meth:`Engine.next_due`, waits
until then, and calls :meth:`Engine.poll`. A frame the server refuses produces an
``error`` event whose ``error.event_id`` echoes the client event's ``event_id``;
the session stays usable.

Speech is sans-I/O too: replies are voiced from a
:class:`~voxline.realtime.server.engine.speech.VoiceCache` the engine only reads. A response
whose reply is not in it waits after ``response.created``: :meth:`Engine.speech_needed`
names the texts, the driver synthesizes them (off the event loop) and hands them in with
:meth:`Engine.provide_speech`; until then the response adds nothing to :meth:`Engine.next_due`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from voxline.realtime.server.engine import errors, listening, turns
from voxline.realtime.server.engine.client_schema import BETA_ONLY_TYPES, EVENT_SCHEMAS, SUPPORTED_TYPES
from voxline.realtime.server.engine.conversation import Conversation, Entry
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.hearing import HearingJob
from voxline.realtime.server.engine.ids import IdFactory, event
from voxline.realtime.server.engine.items import decode_base64, parse_item
from voxline.realtime.server.engine.nulls import without_nulls
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.session_config import SessionConfig, no_responses
from voxline.realtime.server.engine.speech import Samples, Synth, VoiceCache
from voxline.realtime.server.engine.state import EngineConfig, SessionState
from voxline.realtime.server.engine.validate import PlainStrings, a_kind, check_object, parse_json, plain_strings

__all__ = ["PLAIN_EVENTS", "Engine"]

Events = list[dict[str, Any]]

PLAIN_EVENTS: dict[str, PlainStrings] = {
    kind: plain for kind, schema in EVENT_SCHEMAS.items() if (plain := plain_strings(schema)) is not None
}
"""The client events whose every field is a plain string (appends, commits, deletes...): checked by a glance."""


class Engine:
    """One Realtime session on the local server (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        scenario: Scenario,
        voices: VoiceCache | Synth,
        *,
        wall_time: float,
        ids: IdFactory | None = None,
        initial_session: dict[str, Any] | None = None,
    ) -> None:
        ids = ids or IdFactory()
        if not isinstance(voices, VoiceCache):  # a bare synth voices the fixed replies now, before any frame
            voices = VoiceCache.for_scenario(scenario, voices)
        self._state = SessionState(
            config=config,
            ids=ids,
            scenario=scenario,
            voices=voices,
            session_id=ids.new("sess"),
            conversation_id=ids.new("conv"),
            conversation=Conversation(keep_audio=config.keep_item_audio),
            expires_at=int(wall_time + config.max_session_s),
            session=SessionConfig(
                str((initial_session or {}).get("model") or config.model),
                config.instructions,
                transcription=config.transcription,
            ),
        )
        self._state.hearing.enabled = config.hearing
        if initial_session is not None:
            self._state.session.update(initial_session, voice_locked=False)
        self._apply_input_config()
        self._handlers: dict[str, Callable[[dict[str, Any], float], Events]] = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append,
            "input_audio_buffer.commit": lambda _e, _now: turns.commit(self._state),
            "input_audio_buffer.clear": lambda _e, _now: turns.clear(self._state),
            "conversation.item.create": self._item_create,
            "conversation.item.retrieve": self._item_retrieve,
            "conversation.item.delete": self._item_delete,
            "conversation.item.truncate": self._item_truncate,
            "response.create": self._response_create,
            "response.cancel": self._response_cancel,
        }
        self.closing: ErrorSpec | None = None
        """Set once the client sent what ends its session (a beta-only event): the error said, the socket closes
        with 4000 and this as its reason."""

    @property
    def ids(self) -> IdFactory:
        """The session's id factory (its own: derived from the server's when seeded)."""
        return self._state.ids

    @property
    def session_id(self) -> str:
        return self._state.session_id

    @property
    def max_session_s(self) -> float:
        """The session's maximum duration (``expires_at`` is this after its start)."""
        return self._state.config.max_session_s

    def open(self) -> Events:
        """``session.created`` and ``conversation.created``, the first events of a session."""
        state = self._state
        conversation = {"id": state.conversation_id, "object": "realtime.conversation"}
        return [
            event(state.ids, "session.created", session=state.session.view(self._identity())),
            event(state.ids, "conversation.created", conversation=conversation),
        ]

    def receive(self, frame: str | bytes, now: float) -> Events:
        """Handle one client frame; return the events it causes right away."""
        try:
            data = self.parse(frame)
        except RequestRejected as exc:
            return [self.error(exc.spec)]
        return self.handle(data, now)

    def parse(self, frame: str | bytes) -> dict[str, Any]:
        """The JSON object of a client frame; :class:`RequestRejected` for what :meth:`receive` refuses unread."""
        if isinstance(frame, (bytes, bytearray, memoryview)):
            raise RequestRejected(errors.binary_frame())
        limit = self._state.config.max_event_bytes
        if len(frame) > limit:
            raise RequestRejected(errors.event_too_large(len(frame), limit))
        data = parse_json(frame)
        if not isinstance(data, dict):
            raise RequestRejected(errors.not_an_object(a_kind(data)))
        return data

    def handle(self, data: dict[str, Any], now: float) -> Events:
        """Handle one client event already read by :meth:`parse` (e.g. by a driver that routes on its type)."""
        client_event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
        try:
            events = self._dispatch(data, now)
        except RequestRejected as exc:
            events = [self.error(exc.spec, client_event_id)]
        return events + self._sweep(now)

    def append_audio(self, audio: bytes, now: float) -> Events:
        """``input_audio_buffer.append`` of raw bytes in the input format, as a media track delivers them.

        The same checks and events as the client event, without its JSON and base64 round trip.
        """
        try:
            events = self._append_bytes(audio, now)
        except RequestRejected as exc:
            events = [self.error(exc.spec)]
        return events + self._sweep(now)

    def poll(self, now: float) -> Events:
        """Events due by ``now``: the idle timeout, and response steps due by then or within the
        pacing's burst after it (they go out together, as the service's stream arrives in bursts)."""
        state = self._state
        events: Events = []
        if state.idle_deadline is not None and now >= state.idle_deadline:
            events.extend(turns.fire_idle(state, now))
        upto = now + state.config.pacing.burst_s
        runs = list(state.runs)
        # the runs' steps in the order they are due, as without a burst; a step moves only its own run's schedule, so
        # a heap orders them (one look at every run per poll, not per step: out-of-band responses run side by side)
        due = [(t, k) for k, run in enumerate(runs) if (t := run.next_due()) is not None and t <= upto]
        heapq.heapify(due)
        while due:
            _, k = heapq.heappop(due)
            step = runs[k].step(upto, now)
            if step is not None:
                events.extend(step)
            if (t := runs[k].next_due()) is not None and t <= upto:
                heapq.heappush(due, (t, k))
        return events + self._sweep(now)

    def next_due(self) -> float | None:
        """When :meth:`poll` next has something to do, or ``None`` (a response waiting for speech counts as idle)."""
        times = [t for t in (run.next_due() for run in self._state.runs) if t is not None]
        if self._state.idle_deadline is not None:
            times.append(self._state.idle_deadline)
        return min(times) if times else None

    def audio_lead(self, now: float) -> float | None:
        """The least :meth:`ResponseRun.audio_lead` of the responses whose next step sends audio (None: none does):
        how soon a listener would run out of this session's audio if nothing more were sent."""
        leads = [lead for run in self._state.runs if (lead := run.audio_lead(now)) is not None]
        return min(leads) if leads else None

    def speech_needed(self) -> list[str]:
        """Texts that responses wait to have voiced, each once, in the order they were asked for."""
        return list(dict.fromkeys(text for run in self._state.runs for text in run.speech_needed()))

    def provide_speech(self, text: str, samples: Samples, now: float) -> None:
        """The speech of ``text`` (int16 mono 24 kHz); the responses waiting for it stream from ``now`` on.

        Speech nobody waits for any more (e.g. the response was cancelled) is ignored.
        """
        for run in self._state.runs:
            run.provide_speech(text, samples, now)

    def hearing_waits(self) -> bool:
        """Whether :meth:`take_hearing` has a job to hand out: asked after every client frame, so it only looks."""
        return bool(self._state.hearing.waiting)

    def take_hearing(self) -> list[HearingJob]:
        """User audio items to recognise, each handed out once (see :mod:`.engine.listening`)."""
        return listening.take(self._state)

    def provide_hearing(self, item_id: str, text: str | None, now: float) -> Events:
        """What the recogniser heard in ``item_id`` (``None``: it failed): transcript events, and a
        response that waited for the words. An item nobody waits for any more adds nothing."""
        return listening.heard(self._state, item_id, text, now) + self._sweep(now)

    def expire(self) -> Events:
        """The ``session_expired`` error sent at the maximum session duration."""
        return [self.error(errors.session_expired(self._state.config.max_session_minutes))]

    def error(self, spec: ErrorSpec, client_event_id: str | None = None) -> dict[str, Any]:
        """An ``error`` event with a fresh server ``event_id``."""
        return spec.to_event(self._state.ids.new("event"), client_event_id)

    # Dispatch.

    def _dispatch(self, data: dict[str, Any], now: float) -> Events:
        if "type" not in data:
            raise RequestRejected(errors.missing_parameter("type"))
        type_ = data["type"]
        if not isinstance(type_, str):
            raise RequestRejected(errors.invalid_type("type", "a string", a_kind(type_)))
        handler = self._handlers.get(type_)
        if handler is None:
            if type_ in BETA_ONLY_TYPES:  # the beta protocol is shut down: its events end the session, as its header
                self.closing = errors.beta_disabled()
                raise RequestRejected(self.closing)
            raise RequestRejected(errors.invalid_choice("type", type_, SUPPORTED_TYPES))
        plain = PLAIN_EVENTS.get(type_)
        if plain is None or not plain.holds(data):  # the plain form (every append) passes both as it is
            data = without_nulls(data, EVENT_SCHEMAS[type_])
            check_object(data, EVENT_SCHEMAS[type_])
        return handler(data, now)

    def _sweep(self, now: float) -> Events:
        """Retire finished responses; lock the voice once audio was produced; arm the idle timer."""
        state = self._state
        for run in list(state.runs):
            if run.produced_audio:
                state.voice_locked = True
            if run.done:
                state.runs.remove(run)
                if run.in_conversation and run.status == "completed":  # from when it was due, burst or not
                    turns.arm_idle(state, max(now, run.stepped_at), run.audio_seconds)
        return []

    def _identity(self) -> dict[str, Any] | None:
        state = self._state
        if not state.config.session_identity:
            return None
        return {"id": state.session_id, "object": state.session.object_name, "expires_at": state.expires_at}

    def _apply_input_config(self) -> None:
        session = self._state.session
        self._state.input.configure(session.input_format, session.turn_detection)

    # Handlers.

    def _session_update(self, data: dict[str, Any], now: float) -> Events:
        state = self._state
        state.session.update(data["session"], voice_locked=state.voice_locked)
        self._apply_input_config()
        return [event(state.ids, "session.updated", session=state.session.view(self._identity()))]

    def _append(self, data: dict[str, Any], now: float) -> Events:
        return self._append_bytes(decode_base64(data["audio"], "audio"), now)

    def _append_bytes(self, audio: bytes, now: float) -> Events:
        limit = self._state.config.max_audio_bytes
        if len(audio) > limit:
            message = (
                f"Invalid 'audio': {len(audio)} bytes of audio is more than the maximum of {limit} bytes per event."
            )
            raise RequestRejected(errors.invalid_value("audio", message))
        buffer = self._state.input
        buffer.trim_silence()
        cap = self._state.config.max_buffer_bytes
        if buffer.buffered_bytes + len(audio) > cap:
            raise RequestRejected(errors.input_buffer_full(buffer.buffered_bytes, len(audio), cap))
        return turns.append_audio(self._state, audio, now)

    def _item_create(self, data: dict[str, Any], now: float) -> Events:
        state = self._state
        new = parse_item(data["item"], "item", state.ids.new("item"))
        entry = Entry(new.item, {k: [bytes(v)] for k, v in new.audio.items()}, fmt=state.input.format)
        previous = state.conversation.insert(entry, data.get("previous_item_id"))
        state.idle_deadline = None
        return [
            event(state.ids, "conversation.item.added", previous_item_id=previous, item=entry.public()),
            event(state.ids, "conversation.item.done", previous_item_id=previous, item=entry.public()),
        ]

    def _item_retrieve(self, data: dict[str, Any], now: float) -> Events:
        item = self._state.conversation.retrieve(data["item_id"])
        return [event(self._state.ids, "conversation.item.retrieved", item=item)]

    def _item_delete(self, data: dict[str, Any], now: float) -> Events:
        self._state.conversation.delete(data["item_id"])
        return [event(self._state.ids, "conversation.item.deleted", item_id=data["item_id"])]

    def _item_truncate(self, data: dict[str, Any], now: float) -> Events:
        state = self._state
        item_id, index, end_ms = data["item_id"], int(data["content_index"]), int(data["audio_end_ms"])
        state.conversation.truncate(item_id, index, end_ms)
        events = [
            event(state.ids, "conversation.item.truncated", item_id=item_id, content_index=index, audio_end_ms=end_ms)
        ]
        for run in state.runs:
            events.extend(run.stop_item(item_id))
        return events

    def _response_create(self, data: dict[str, Any], now: float) -> Events:
        if self._state.config.transcription:
            raise RequestRejected(no_responses())
        return listening.respond(self._state, data.get("response") or {}, now)

    def _response_cancel(self, data: dict[str, Any], now: float) -> Events:
        state = self._state
        response_id = data.get("response_id")
        if response_id is not None:
            run = state.find_run(response_id)
        else:
            run = state.default_run() or next((r for r in reversed(state.runs) if not r.done), None)
        if run is None:
            listening.cancel_deferred(state)  # never sent as created: nothing to report
            raise RequestRejected(errors.cancel_not_active())
        return run.cancel("client_cancelled")

