"""The local server's sans-I/O Live engine: one session, client frames and caller audio in, events out.

The Live model is full duplex and owns the turn-taking; so does the stand-in, in its plain way:

- **The timeline is the caller's audio.** Every input sample moves the session timeline on by
  its duration; nothing else does (a session whose caller sends no audio stands still, as the
  service's does). Timeline positions are kept as 24 kHz samples from the session's start.
- **The output track never stops.** For every ``frame_ms`` of timeline the engine renders one
  frame of the track, silent unless the stand-in speaks, and sends it as
  ``session.output_audio.delta`` in the session's format (to a sideband as 24 kHz PCM16 with
  ``start_ms`` / ``end_ms``). A frame is rendered once the caller's audio has reached its end,
  so output sample ``n`` always lies at ``n / 24`` ms on the timeline.
- **It answers turns.** An energy VAD listens to the caller; when a turn ends (silence), the next
  scripted reply of the scenario starts ``reply_latency_ms`` later; a ``session.commentary.append``
  asks for one too. Replies are voiced from a :class:`VoiceCache`; a reply with placeholders waits
  for :meth:`LiveEngine.provide_speech` (:meth:`speech_needed` names it), as the Realtime engine does.
- **It stops when it hears the caller.** Speech onset while it speaks cuts its utterance at the
  first sample not yet sent (the model-owned barge-in): the rest of the reply is dropped, the
  output transcript ends with the last word whose audio started.
- **Transcripts are on the timeline.** Output words are placed by their share of the reply's
  characters; input transcripts are the scenario's scripted ``user_says`` (the stand-in
  recognises no speech), placed on the caller's detected speech.

Every step returns :class:`Out` items: an event and its audience (the primary connection, the
sideband observers, both, or the connection that sent the command).
"""

from __future__ import annotations

import base64
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from voxline.audio.vad import EnergyVad, SpeechStart, SpeechStop
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.items import decode_base64
from voxline.realtime.server.engine.scenario import Call, Output, Say, Scenario
from voxline.realtime.server.engine.speech import Samples, VoiceCache
from voxline.realtime.server.engine.validate import a_kind, check_object, parse_json
from voxline.realtime.server.live import errors as live_errors
from voxline.realtime.server.live.backend import ResponsesBackend
from voxline.realtime.server.live.audio import MODEL_RATE, Pcm, SteadyResampler, TrackEncoder
from voxline.realtime.server.live.schema import CLIENT_TYPES, EVENT_SCHEMAS, SIDEBAND_TYPES
from voxline.realtime.server.live.settings import (MAX_INPUT_ITEMS, LiveConfig, LiveSettings, Transport, fork_settings,
                                                  start_settings)
from voxline.realtime.server.live.speaker import Speaker
from voxline.realtime.server.live.track import ms, place_words

__all__ = ["Audience", "CloseReason", "LiveEngine", "Out", "Source"]

Audience = Literal["all", "primary", "observers", "origin"]
Source = Literal["primary", "sideband"]
CloseReason = Literal["close_requested", "expired", "content", "remote_hangup", "connection_lost"]

_MAX_FIXTURE_S = 30
_MAX_APPEND_BYTES = 15 * 1024 * 1024
_MAX_CONTEXT_CHARS = 4000  # about the service's 500 tokens


@dataclass(frozen=True, slots=True)
class Out:
    """One server event and who receives it."""

    to: Audience
    event: dict[str, Any]


class LiveEngine:
    """One Live session on the local server (see the module docstring)."""

    def __init__(
        self,
        config: LiveConfig,
        scenario: Scenario,
        voices: VoiceCache,
        *,
        wall_time: float,
        ids: IdFactory | None = None,
        history: tuple[tuple[str, str], ...] = (),
        turn_index: int = 0,
        user_turns: int = 0,
        fork_of: LiveSettings | None = None,
        max_event_bytes: int = MAX_CLIENT_EVENT_BYTES,
    ) -> None:
        self.config = config
        self.max_event_bytes = max_event_bytes  # a larger frame is refused unread (a Realtime session's limit)
        self._scenario = scenario
        self._voices = voices
        self._ids = ids or IdFactory()
        self.session_id = self._ids.new("sess")
        self.expires_at = int(wall_time + config.max_session_s)
        self.settings: LiveSettings | None = None
        self.closed: CloseReason | None = None
        self.observers = 0
        self.muted = False
        # (role, text) of what was said, for a fork: the newest that a fork's input takes
        self.history: deque[tuple[str, str]] = deque(history, maxlen=MAX_INPUT_ITEMS)
        self.turn_index = turn_index
        self._fork_of = fork_of  # a fork's session.start carries overrides of these, not a new session
        self._frame = MODEL_RATE * config.frame_ms // 1000
        self._in_rate = MODEL_RATE
        self._in_samples = 0
        self._tail = b""
        self._position = 0  # timeline, 24 kHz samples
        self._encoder: TrackEncoder | None = None
        self._reflect: SteadyResampler | None = None
        self._vad: EnergyVad | None = None
        self._speech_start: int | None = None  # timeline position of the caller's current speech
        self.user_turns = user_turns  # the caller's turns so far (picks the scripted transcript)
        self._speaker = Speaker(self._frame, voices, self.history)
        self._awaiting: dict[str, deque[Output]] = {}  # client delegations → what follows their answer
        self._usage_at = 0
        self._wall_time = wall_time
        self._backend: ResponsesBackend | None = None  # with Responses delegation
        self._last_user_s = 0.0
        self._after: tuple[Output, ...] = ()  # what the current turn says once its delegations are answered
        self._handlers: dict[str, Callable[[dict[str, Any], Source], list[Out]]] = {
            "session.update": self._update,
            "session.close": lambda data, _s: self.close("close_requested", _event_id(data)),
            "session.input_audio.append": self._append,
            "session.input_audio.mute": lambda data, _s: self._mute(True, data),
            "session.input_audio.unmute": lambda data, _s: self._mute(False, data),
            "session.output_audio.fixture.play": self._fixture_play,
            "session.instructions.append": self._context,
            "session.thinking.append": self._context,
            "session.commentary.append": self._context,
            "response.create": self._responses_only,
            "response.item.create": self._responses_only,
        }

    # Starting.

    @property
    def started(self) -> bool:
        return self.settings is not None

    @property
    def timeline_ms(self) -> int:
        return ms(self._position)

    def start(self, settings: LiveSettings, client_event_id: str | None = None) -> list[Out]:
        """Begin the session with resolved settings: ``session.started``."""
        self.settings = settings
        if settings.delegation_type == "responses":
            model = str((settings.delegation.get("responses") or {}).get("model") or "voxline-local-backend")
            self._backend = ResponsesBackend(self._ids, model, self._wall_time)
        fmt = settings.format if settings.transport == "websocket" else None
        self._in_rate = fmt.rate if fmt is not None else MODEL_RATE
        self._encoder = TrackEncoder(fmt) if fmt is not None else None
        self._reflect = SteadyResampler(self._in_rate, MODEL_RATE)
        self._vad = EnergyVad(
            sample_rate=self._in_rate,
            threshold=self.config.vad_threshold,
            prefix_padding_ms=0,
            silence_duration_ms=self.config.vad_silence_ms,
        )
        return [Out("all", self._event("session.started", client_event_id, session=self._resource()))]

    def snapshot(self) -> dict[str, Any]:
        """``session.started`` with the session as it is now (for a sideband that attaches later)."""
        return self._event("session.started", None, session=self._resource())

    # Frames.

    def receive(self, frame: str | bytes, source: Source = "primary", transport: Transport = "websocket") -> list[Out]:
        """Handle one client frame from the primary connection or a sideband."""
        client_event_id: str | None = None
        try:
            data = self._parse(frame, transport if source == "primary" else "websocket")
            client_event_id = _event_id(data)
            return self._dispatch(data, source, transport)
        except RequestRejected as exc:
            return [self.error(exc.spec, client_event_id)]

    def append_audio(self, audio: bytes) -> list[Out]:
        """Caller audio in the session's input format, as a media track or an append delivers it."""
        if self.closed is not None or self.settings is None:
            return []
        raw = self._tail + audio
        usable = len(raw) - len(raw) % (self.settings.format.bytes_per_sample if self._encoder else 2)
        self._tail = raw[usable:]
        if self._encoder is not None:
            samples = self.settings.format.decode(raw[:usable])
        else:
            samples = np.frombuffer(raw[:usable], dtype="<i2").astype(np.int16)
        return self._hear(samples)

    def append_pcm(self, samples: Pcm) -> list[Out]:
        """Caller audio as 24 kHz int16 samples (a WebRTC session's decoded track)."""
        if self.closed is not None or self.settings is None:
            return []
        return self._hear(samples)

    def close(self, reason: CloseReason, client_event_id: str | None = None) -> list[Out]:
        """End the session: ``session.closed`` with ``reason`` (nothing if it has already ended)."""
        if self.closed is not None or self.settings is None:
            self.closed = self.closed or reason
            return []
        self.closed = reason
        if self._speaker.current is not None:
            self._speaker.current.cut(self._speaker.rendered)
            self._speaker.finish()
        event = self._event("session.closed", client_event_id, reason=reason, session=self._resource(),
                            usage=self._usage())
        return [Out("all", event)]

    def error(self, spec: ErrorSpec, client_event_id: str | None = None) -> Out:
        """An ``error`` for the connection that sent the command."""
        return Out("origin", live_errors.live_error_event(spec, self._ids.new("event"), client_event_id))

    # Speech supply (the same contract as the Realtime engine's).

    def speech_needed(self) -> list[str]:
        return self._speaker.speech_needed()

    def provide_speech(self, text: str, samples: Samples, now: float = 0.0) -> None:
        self._voices.put(text, samples)

    # Parsing and dispatch.

    def _parse(self, frame: str | bytes, carrier: Transport) -> dict[str, Any]:
        """The frame's JSON object; a binary frame is refused in the words of what carried it (a sideband's is a
        WebSocket's, whatever the session's transport)."""
        if isinstance(frame, (bytes, bytearray, memoryview)):
            raise RequestRejected(errors.binary_frame() if carrier == "websocket" else errors.binary_channel_message())
        if len(frame) > self.max_event_bytes:
            raise RequestRejected(errors.event_too_large(len(frame), self.max_event_bytes))
        data = parse_json(frame)
        if not isinstance(data, dict):
            raise RequestRejected(errors.not_an_object(a_kind(data)))
        return data

    def _dispatch(self, data: dict[str, Any], source: Source, transport: Transport) -> list[Out]:
        if "type" not in data:
            raise RequestRejected(errors.missing_parameter("type"))
        type_ = data["type"]
        if not isinstance(type_, str):
            raise RequestRejected(errors.invalid_type("type", "a string", a_kind(type_)))
        allowed = CLIENT_TYPES if source == "primary" else SIDEBAND_TYPES
        if type_ not in allowed:
            raise RequestRejected(errors.invalid_choice("type", type_, allowed))
        check_object(data, EVENT_SCHEMAS[type_])
        if type_ == "session.start":
            if self.settings is not None:
                raise RequestRejected(live_errors.already_started())
            if self._fork_of is not None:
                settings = fork_settings(self._fork_of, data["session"], transport)
            else:
                settings = start_settings(data["session"], transport)
            return self.start(settings, _event_id(data))
        if self.settings is None:
            raise RequestRejected(live_errors.not_started())
        if self.closed is not None:
            return []
        if type_.startswith("decision.") or type_ == "transport.dtmf.send":
            raise RequestRejected(live_errors.not_supported_locally(type_))
        return self._handlers[type_](data, source)

    # Commands.

    def _update(self, data: dict[str, Any], source: Source) -> list[Out]:
        assert self.settings is not None
        self.settings = self.settings.updated(data["session"])
        return [Out("all", self._event("session.updated", _event_id(data), session=self._resource()))]

    def _append(self, data: dict[str, Any], source: Source) -> list[Out]:
        audio = decode_base64(data["audio"], "audio")
        if len(audio) > _MAX_APPEND_BYTES:
            message = f"Invalid 'audio': {len(audio)} bytes is more than the maximum of {_MAX_APPEND_BYTES} per event."
            raise RequestRejected(errors.invalid_value("audio", message))
        return self.append_audio(audio)

    def _mute(self, muted: bool, data: dict[str, Any]) -> list[Out]:
        self.muted = muted
        kind = "session.input_audio.muted" if muted else "session.input_audio.unmuted"
        return [Out("all", self._event(kind, _event_id(data)))]

    def _context(self, data: dict[str, Any], source: Source) -> list[Out]:
        kind = data["type"]
        if self._speaker.fixture is not None and kind == "session.instructions.append":
            raise RequestRejected(live_errors.fixture_active())
        content, delegation_id = data["content"], data["delegation_id"]
        if len(content) > _MAX_CONTEXT_CHARS:
            message = f"Invalid 'content': {len(content)} characters is more than the local limit of {_MAX_CONTEXT_CHARS}."
            raise RequestRejected(errors.invalid_value("content", message))
        if delegation_id is not None and delegation_id not in self._awaiting:
            message = f"Invalid 'delegation_id': no open client delegation '{delegation_id[:80]}'."
            raise RequestRejected(errors.invalid_value("delegation_id", message))
        at = ms(self._position)
        out = [Out("all", self._event(kind.replace(".append", ".appended"), _event_id(data), start_ms=at, end_ms=at))]
        phrase = self.config.close_on_text
        if phrase and phrase.lower() in content.lower():
            return out + self.close("content")
        if kind == "session.commentary.append":
            if delegation_id is not None:
                self._speaker.queue(self._awaiting.pop(delegation_id))
            elif not self._speaker.busy:
                self._speaker.queue(self._next_turn())
        return out

    def _responses_only(self, data: dict[str, Any], source: Source) -> list[Out]:
        assert self.settings is not None
        backend = self._backend
        if backend is None:
            raise RequestRejected(live_errors.delegation_mismatch(data["type"], "responses", self.settings.delegation_type))
        if data["type"] == "response.item.create":
            backend.item_create(data["item"])
            return []
        pending = backend.pending
        events, then = backend.respond(self._event, _event_id(data))
        if pending:
            self._speaker.queue(then)
        elif not self._speaker.busy:
            self._speaker.queue(self._next_turn())  # a response asked for with nothing delegated: the next reply
        return [Out("all", event) for event in events]

    def _fixture_play(self, data: dict[str, Any], source: Source) -> list[Out]:
        if self._speaker.fixture is not None:
            raise RequestRejected(live_errors.fixture_active())
        audio = decode_base64(data["audio"], "audio")
        if len(audio) % 2 or len(audio) > _MAX_FIXTURE_S * MODEL_RATE * 2:
            message = f"Invalid 'audio': a fixture is whole PCM16 samples at 24 kHz, at most {_MAX_FIXTURE_S} s."
            raise RequestRejected(errors.invalid_value("audio", message))
        self._speaker.play_fixture(np.frombuffer(audio, dtype="<i2").astype(np.int16), _event_id(data))
        return [Out("all", self._event("session.output_audio.fixture.playing", _event_id(data)))]

    # Hearing and speaking.

    def _hear(self, samples: Pcm) -> list[Out]:
        assert self._vad is not None and self._reflect is not None
        out: list[Out] = []
        if self.observers and samples.size:
            reflected = self._reflect.process(samples)
            out.append(Out("observers", {"type": "session.input_audio.append", "audio": _b64(reflected.astype("<i2").tobytes())}))
        heard = samples if not (self.muted or self._speaker.fixture is not None) else np.zeros_like(samples)
        self._in_samples += int(samples.size)
        for event in self._vad.process(heard):
            match event:
                case SpeechStart():
                    out.extend(self._render_until(self._timeline(event.onset)))
                    self._speech_start = self._timeline(event.onset)
                    detected = self._timeline(event.onset + self._vad.onset_frames * self._vad.frame)
                    self._speaker.interrupt(max(self._speaker.rendered, detected))
                case SpeechStop():
                    out.extend(self._render_until(self._timeline(event.end)))
                    out.extend(self._turn_ended(self._timeline(event.last_voiced), self._timeline(event.end)))
        out.extend(self._render_until(self._timeline(self._in_samples)))
        return out

    def _timeline(self, input_sample: int) -> int:
        return input_sample * MODEL_RATE // self._in_rate

    def _turn_ended(self, last_voiced: int, detected: int) -> list[Out]:
        start = self._speech_start if self._speech_start is not None else last_voiced
        self._speech_start = None
        out: list[Out] = []
        scripted = self._scenario.user_says
        if self.user_turns < len(scripted):
            text = scripted[self.user_turns]
            self.history.append(("user", text))
            for word in place_words(text, start, max(1, last_voiced - start)):
                out.append(Out("all", self._event("session.input_transcript.delta", None, delta=word.text,
                                                   start_ms=ms(word.start), end_ms=ms(word.end))))
        self.user_turns += 1
        self._last_user_s = (last_voiced - start) / MODEL_RATE
        if self._speaker.fixture is None:
            self._speaker.queue(self._next_turn(), at=detected + MODEL_RATE * self.config.reply_latency_ms // 1000)
        return out

    def _next_turn(self) -> deque[Output]:
        turns = self._scenario.turns
        index = self.turn_index
        if index >= len(turns):
            index = len(turns) - 1 if self._scenario.after_last == "repeat_last" else index % len(turns)
        self.turn_index += 1
        self._after = turns[index].after or ()
        return deque(self._fill(o, index + 1) for o in turns[index].outputs)

    def _fill(self, output: Output, turn: int) -> Output:
        if not isinstance(output, Say) or "{" not in output.text:
            return output
        seconds = f"{self._last_user_s:.1f}"
        text = output.text.replace("{user_seconds}", seconds).replace("{turn}", str(turn)).replace("{user_text}", "")
        return Say(re.sub(r"\s+", " ", text).strip())

    def _render_until(self, position: int) -> list[Out]:
        """Render every whole frame of the track that ends by ``position``."""
        self._position = max(self._position, position)
        out: list[Out] = []
        speaker = self._speaker
        while speaker.rendered + self._frame <= self._position and self.closed is None:
            a = speaker.rendered
            frame, events = speaker.render(self._event, self._delegate)
            delta = self._encoder.encode(frame) if self._encoder is not None else frame.astype("<i2").tobytes()
            out.append(Out("primary", {"type": "session.output_audio.delta", "delta": _b64(delta)}))
            if self.observers:
                out.append(Out("observers", {"type": "session.output_audio.delta", "delta": _b64(frame.astype("<i2").tobytes()),
                                             "start_ms": ms(a), "end_ms": ms(speaker.rendered)}))
            out.extend(Out("all", event) for event in events)
            if speaker.rendered - self._usage_at >= MODEL_RATE * self.config.usage_every_s:
                self._usage_at = speaker.rendered
                out.append(Out("all", self._event("session.usage.updated", None, usage=self._usage())))
        return out

    def _delegate(self, calls: list[Call], then: deque[Output], at_ms: int) -> list[dict[str, Any]]:
        """Scripted calls handed over: to the Responses backend, or to the app (answered by a commentary)."""
        then.extend(self._after)
        if self._backend is not None:
            return self._backend.delegate(calls, then, at_ms, self._event)
        delegation_id = self._ids.new("deleg")
        self._awaiting[delegation_id] = then
        delegation = {"id": delegation_id, "target": "client", "type": "delegation"}
        return [self._event("session.delegation.created", None, delegation=delegation, offset_ms=at_ms)]

    # Rendering events.

    def _event(self, type_: str, client_event_id: str | None, **fields: Any) -> dict[str, Any]:
        event: dict[str, Any] = {"type": type_, "event_id": self._ids.new("event"), **fields}
        if client_event_id is not None:
            event["client_event_id"] = client_event_id
        return event

    def _resource(self) -> dict[str, Any]:
        assert self.settings is not None
        return self.settings.resource(self.session_id, self.expires_at)

    def _usage(self) -> dict[str, Any]:
        return {"seconds": float(ms(self._position) // 1000)}


def _event_id(data: dict[str, Any]) -> str | None:
    value = data.get("event_id")
    return value if isinstance(value, str) else None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")

