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
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.items import decode_base64
from voxline.realtime.server.engine.scenario import Call, Output, Say, Scenario
from voxline.realtime.server.engine.speech import Samples, VoiceCache
from voxline.realtime.server.engine.validate import check_object, json_kind, parse_json
from voxline.realtime.server.live import errors as live_errors
from voxline.realtime.server.live.audio import MODEL_RATE, Pcm, SteadyResampler, TrackEncoder
from voxline.realtime.server.live.schema import CLIENT_TYPES, EVENT_SCHEMAS, SIDEBAND_TYPES
from voxline.realtime.server.live.settings import LiveConfig, LiveSettings, Transport, fork_settings, start_settings
from voxline.realtime.server.live.track import Utterance, Word, ms, place_words

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


@dataclass(slots=True)
class _Pending:
    """Outputs waiting their turn on the track, and the earliest timeline position for the first."""

    outputs: deque[Output]
    at: int


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
        fork_of: LiveSettings | None = None,
    ) -> None:
        self.config = config
        self._scenario = scenario
        self._voices = voices
        self._ids = ids or IdFactory()
        self.session_id = self._ids.new("sess")
        self.expires_at = int(wall_time + config.max_session_s)
        self.settings: LiveSettings | None = None
        self.closed: CloseReason | None = None
        self.observers = 0
        self.muted = False
        self.history: list[tuple[str, str]] = list(history)  # (role, text) of what was said, for a fork
        self.turn_index = turn_index
        self._fork_of = fork_of  # a fork's session.start carries overrides of these, not a new session
        self._frame = MODEL_RATE * config.frame_ms // 1000
        self._in_rate = MODEL_RATE
        self._in_samples = 0
        self._tail = b""
        self._position = 0  # timeline, 24 kHz samples
        self._rendered = 0
        self._encoder: TrackEncoder | None = None
        self._reflect: SteadyResampler | None = None
        self._vad: EnergyVad | None = None
        self._speech_start: int | None = None  # timeline position of the caller's current speech
        self._user_turns = 0
        self._current: Utterance | None = None
        self._pending: _Pending | None = None
        self._fixture: Utterance | None = None
        self._fixture_event: str | None = None
        self._said: list[str] = []  # words of the current utterance sent so far
        self._awaiting: dict[str, deque[Output]] = {}  # client delegations → what follows their answer
        self._usage_at = 0
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
            data = self._parse(frame)
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
        if self._current is not None:
            self._current.cut(self._rendered)
            self._finish_utterance()
        event = self._event("session.closed", client_event_id, reason=reason, session=self._resource(),
                            usage=self._usage())
        return [Out("all", event)]

    def error(self, spec: ErrorSpec, client_event_id: str | None = None) -> Out:
        """An ``error`` for the connection that sent the command."""
        return Out("origin", live_errors.live_error_event(spec, self._ids.new("event"), client_event_id))

    # Speech supply (the same contract as the Realtime engine's).

    def speech_needed(self) -> list[str]:
        pending = self._pending
        if pending is None or not pending.outputs:
            return []
        head = pending.outputs[0]
        return [head.text] if isinstance(head, Say) and head.text not in self._voices else []

    def provide_speech(self, text: str, samples: Samples, now: float = 0.0) -> None:
        self._voices.put(text, samples)

    # Parsing and dispatch.

    def _parse(self, frame: str | bytes) -> dict[str, Any]:
        if isinstance(frame, (bytes, bytearray, memoryview)):
            raise RequestRejected(errors.binary_frame())
        data = parse_json(frame)
        if not isinstance(data, dict):
            raise RequestRejected(errors.not_an_object(_article(json_kind(data))))
        return data

    def _dispatch(self, data: dict[str, Any], source: Source, transport: Transport) -> list[Out]:
        if "type" not in data:
            raise RequestRejected(errors.missing_parameter("type"))
        type_ = data["type"]
        if not isinstance(type_, str):
            raise RequestRejected(errors.invalid_type("type", "a string", _article(json_kind(type_))))
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
        if self._fixture is not None and kind == "session.instructions.append":
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
                self._queue(self._awaiting.pop(delegation_id))
            elif self._current is None and self._pending is None:
                self._queue(self._next_turn())
        return out

    def _responses_only(self, data: dict[str, Any], source: Source) -> list[Out]:
        assert self.settings is not None
        if self.settings.delegation_type != "responses":
            raise RequestRejected(live_errors.delegation_mismatch(data["type"], "responses", self.settings.delegation_type))
        return []

    def _fixture_play(self, data: dict[str, Any], source: Source) -> list[Out]:
        if self._fixture is not None:
            raise RequestRejected(live_errors.fixture_active())
        audio = decode_base64(data["audio"], "audio")
        if len(audio) % 2 or len(audio) > _MAX_FIXTURE_S * MODEL_RATE * 2:
            message = f"Invalid 'audio': a fixture is whole PCM16 samples at 24 kHz, at most {_MAX_FIXTURE_S} s."
            raise RequestRejected(errors.invalid_value("audio", message))
        self._interrupt(self._rendered)
        samples = np.frombuffer(audio, dtype="<i2").astype(np.int16)
        self._fixture = Utterance("", samples, self._rendered, words=[])
        self._fixture_event = _event_id(data)
        return [Out("all", self._event("session.output_audio.fixture.playing", self._fixture_event))]

    # Hearing and speaking.

    def _hear(self, samples: Pcm) -> list[Out]:
        assert self._vad is not None and self._reflect is not None
        out: list[Out] = []
        if self.observers and samples.size:
            reflected = self._reflect.process(samples)
            out.append(Out("observers", {"type": "session.input_audio.append", "audio": _b64(reflected)}))
        heard = samples if not (self.muted or self._fixture is not None) else np.zeros_like(samples)
        self._in_samples += int(samples.size)
        for event in self._vad.process(heard):
            match event:
                case SpeechStart():
                    out.extend(self._render_until(self._timeline(event.onset)))
                    self._speech_start = self._timeline(event.onset)
                    self._interrupt(max(self._rendered, self._timeline(event.onset + self._vad.onset_frames * self._vad.frame)))
                case SpeechStop():
                    out.extend(self._render_until(self._timeline(event.end)))
                    out.extend(self._turn_ended(self._timeline(event.last_voiced), self._timeline(event.end)))
        out.extend(self._render_until(self._timeline(self._in_samples)))
        return out

    def _timeline(self, input_sample: int) -> int:
        return input_sample * MODEL_RATE // self._in_rate

    def _interrupt(self, at: int) -> None:
        """The caller spoke (or a fixture starts): stop speaking at ``at``, drop what was still to say."""
        if self._current is not None:
            self._current.cut(at)
        self._pending = None

    def _turn_ended(self, last_voiced: int, detected: int) -> list[Out]:
        start = self._speech_start if self._speech_start is not None else last_voiced
        self._speech_start = None
        out: list[Out] = []
        scripted = self._scenario.user_says
        if self._user_turns < len(scripted):
            text = scripted[self._user_turns]
            self.history.append(("user", text))
            for word in place_words(text, start, max(1, last_voiced - start)):
                out.append(Out("all", self._event("session.input_transcript.delta", None, delta=word.text,
                                                   start_ms=ms(word.start), end_ms=ms(word.end))))
        self._user_turns += 1
        self._last_user_s = (last_voiced - start) / MODEL_RATE
        if self._fixture is None:
            self._queue(self._next_turn(), at=detected + MODEL_RATE * self.config.reply_latency_ms // 1000)
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

    def _queue(self, outputs: deque[Output], at: int | None = None) -> None:
        if not outputs:
            return
        start = max(at if at is not None else self._rendered, self._rendered)
        if self._pending is not None:
            self._pending.outputs.extend(outputs)
        else:
            self._pending = _Pending(outputs, start)

    def _render_until(self, position: int) -> list[Out]:
        """Render every whole frame of the track that ends by ``position``."""
        self._position = max(self._position, position)
        out: list[Out] = []
        while self._rendered + self._frame <= self._position and self.closed is None:
            out.extend(self._render_frame(self._rendered))
        return out

    def _render_frame(self, a: int) -> list[Out]:
        b = a + self._frame
        out: list[Out] = []
        self._start_pending(a, b, out)
        frame = np.zeros(self._frame, dtype=np.int16)
        for source in (self._current, self._fixture):
            if source is not None:
                source.render_into(frame, a)
        if self._encoder is not None:
            out.append(Out("primary", {"type": "session.output_audio.delta", "delta": _b64_bytes(self._encoder.encode(frame))}))
        else:
            out.append(Out("primary", {"type": "session.output_audio.delta", "delta": _b64(frame)}))
        if self.observers:
            out.append(Out("observers", {"type": "session.output_audio.delta", "delta": _b64(frame),
                                         "start_ms": ms(a), "end_ms": ms(b)}))
        self._rendered = b
        current = self._current
        if current is not None:
            out.extend(self._transcript(current.words_done_by(b)))
            if current.finished_by(b):
                natural = current.cut_at is None
                self._finish_utterance()
                if natural and self._pending is not None:
                    self._pending.at = max(self._pending.at, current.end)
        if self._fixture is not None and b >= self._fixture.end:
            self._fixture = None
            out.append(Out("all", self._event("session.output_audio.fixture.played", self._fixture_event)))
        if b - self._usage_at >= MODEL_RATE * self.config.usage_every_s:
            self._usage_at = b
            out.append(Out("all", self._event("session.usage.updated", None, usage=self._usage())))
        return out

    def _start_pending(self, a: int, b: int, out: list[Out]) -> None:
        """Take outputs off the queue while the track is free: speech starts, delegations are made."""
        pending = self._pending
        while self._current is None and self._fixture is None and pending is not None and pending.at < b:
            head = pending.outputs[0]
            if isinstance(head, Say):
                samples = self._voices.get(head.text)
                if samples is None:
                    return  # waits for provide_speech; starts in a later frame
                self._current = Utterance(head.text, samples, max(pending.at, a))
                self._said = []
            elif isinstance(head, Call):
                out.extend(self._delegate(head, pending))
            pending.outputs.popleft()
            if not pending.outputs:
                self._pending = pending = None

    def _delegate(self, call: Call, pending: _Pending) -> list[Out]:
        """A scripted call: the stand-in hands the work to the app; what follows waits for its answer."""
        delegation_id = self._ids.new("deleg")
        rest: deque[Output] = deque(list(pending.outputs)[1:])
        pending.outputs = deque([call])  # the caller pops the call itself
        self._awaiting[delegation_id] = deque([*rest, *self._after])
        delegation = {"id": delegation_id, "target": "client", "type": "delegation"}
        return [Out("all", self._event("session.delegation.created", None, delegation=delegation,
                                       offset_ms=ms(pending.at)))]

    def _transcript(self, words: list[Word]) -> list[Out]:
        out = []
        for word in words:
            self._said.append(word.text)
            out.append(Out("all", self._event("session.output_transcript.delta", None, delta=word.text,
                                               start_ms=ms(word.start), end_ms=ms(word.end))))
        return out

    def _finish_utterance(self) -> None:
        if self._current is not None and self._said:
            self.history.append(("assistant", "".join(self._said).strip()))
        self._current = None
        self._said = []

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


def _b64(samples: Pcm) -> str:
    return base64.b64encode(samples.astype("<i2").tobytes()).decode("ascii")


def _b64_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _article(kind: str) -> str:
    return {"integer": "an integer", "array": "an array", "object": "an object", "null": "null"}.get(kind, f"a {kind}")
