"""A WebRTC call's event routing: the engine between the ``oai-events`` channel and the media tracks.

What differs from a WebSocket session (docs/protocol.md §2, §8):

- the microphone arrives as a media track; each decoded block is fed to the engine
  the way ``input_audio_buffer.append`` would be, so server VAD and commits work as
  over WebSocket;
- assistant audio never goes out as ``response.output_audio.delta``: the deltas are
  taken out of the event stream and their PCM queued in the
  :class:`~voxline.realtime.server.engine.rtc_output.OutputAudioBuffer`, which the outgoing track
  plays in real time, announcing ``output_audio_buffer.started`` / ``.stopped``;
- ``output_audio_buffer.clear`` (a client event the engine does not take) and a
  server-VAD barge-in with ``interrupt_response`` drop the unplayed audio, emit
  ``output_audio_buffer.cleared`` and truncate every cut item at the audio actually
  played: the server knows what was played, so the client sends no truncate.

Synchronous and clock-free like the engine; :mod:`voxline.realtime.server.net.rtc_call` drives it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from voxline.base.audio_format import PCM16_24K, SAMPLE_RATE, AudioFormat
from voxline.realtime.server.engine import errors, wire_audio
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.ids import IdFactory, event
from voxline.realtime.server.engine.rtc_output import OutputAudioBuffer, Samples, Started, Stopped
from voxline.realtime.server.engine.client_schema import CLEAR_SCHEMA
from voxline.realtime.server.engine.validate import check_object

__all__ = ["CallBridge"]

_CLEAR = "output_audio_buffer.clear"

Events = list[dict[str, Any]]


class CallBridge:
    """One call's engine, output buffer and event routing; ``send`` gets each outgoing event."""

    def __init__(self, engine: Engine, send: Callable[[dict[str, Any]], None], ids: IdFactory) -> None:
        self.engine = engine
        self.output = OutputAudioBuffer()
        self._send = send
        self._ids = ids
        self._input_format = PCM16_24K
        self._turn_detection: dict[str, Any] | None = None
        self._formats: dict[str, AudioFormat] = {}  # response_id → output format
        self.failed_at: float | None = None  # the step the engine raised on: not polled again while it is the one due

    def open(self) -> None:
        """``session.created`` and ``conversation.created``."""
        self._route(self.engine.open(), None)

    def client_frame(
        self, frame: str | bytes, now: float, reply: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        """One frame from the data channel, or from a sideband socket (``reply`` gets its errors). A binary one is
        refused, whatever it spells, in the words of what carried it: the data channel's, or a sideband's
        WebSocket's."""
        if not isinstance(frame, str):
            spec = errors.binary_frame() if reply is not None else errors.binary_channel_message()
            self._route([self.engine.error(spec)], now, reply)
            self._route(self._poll(now), now, reply)
            return
        try:
            data = self.engine.parse(frame)  # read once: routed on its type, then handled by the engine
        except RequestRejected as exc:
            events = [self.engine.error(exc.spec)]
        else:
            if data.get("type") == _CLEAR:
                try:
                    check_object(data, CLEAR_SCHEMA)
                except RequestRejected as exc:  # a clear with a bad field is refused whole, as any event
                    event_id = data.get("event_id")
                    self._route([self.engine.error(exc.spec, event_id if isinstance(event_id, str) else None)], now,
                                reply)
                    return
                self._clear(now)
                return
            events = self.engine.handle(data, now)
        self._route(events, now, reply)
        self._route(self._poll(now), now, reply)

    def microphone(self, samples: Samples, now: float) -> None:
        """A decoded block of the incoming track (int16 mono 24 kHz) into the input buffer."""
        payload = wire_audio.from_pcm24k(samples, self._input_format)
        self._route(self.engine.append_audio(payload, now), now)
        self._route(self._poll(now), now)

    def poll(self, now: float) -> None:
        """Engine steps due by ``now``."""
        self._route(self._poll(now), now)

    def _poll(self, now: float) -> Events:
        """``engine.poll``, but not again on a step it raised on (a bug of ours) while that step is the one due: the
        driver says the failure once, and a frame's own events went out before."""
        due = self.engine.next_due()
        if due is not None and due == self.failed_at:
            return []
        try:
            return self.engine.poll(now)
        except Exception:
            self.failed_at = due
            raise

    def deliver(self, events: Events, now: float) -> None:
        """Events the engine produced outside a frame or a poll (e.g. what its recogniser heard)."""
        self._route(events, now)

    def expire(self) -> None:
        """``session_expired`` at the maximum session duration."""
        self._route(self.engine.expire(), None)

    def read_output(self, n: int) -> Samples:
        """The outgoing track's next ``n`` samples; sends ``output_audio_buffer.started`` / ``.stopped``."""
        samples, notices = self.output.read(n)
        for notice in notices:
            match notice:
                case Started(response_id=rid):
                    self._send(event(self._ids, "output_audio_buffer.started", response_id=rid))
                case Stopped(response_id=rid):
                    self._send(event(self._ids, "output_audio_buffer.stopped", response_id=rid))
        return samples

    # Routing.

    def _route(self, events: Events, now: float | None, reply: Callable[[dict[str, Any]], None] | None = None) -> None:
        interrupted = False
        for ev in events:
            if reply is not None and ev["type"] == "error":
                reply(ev)
                continue
            match ev["type"]:
                case "response.output_audio.delta":
                    self._queue_audio(ev)
                    continue
                case "session.created" | "session.updated":
                    self._configure(ev["session"])
                case "response.created":
                    response = ev["response"]
                    self._formats[response["id"]] = AudioFormat.from_wire(response["audio"]["output"]["format"])
                case "response.done":
                    self.output.finish(ev["response"]["id"])
                case "input_audio_buffer.speech_started":
                    interrupted = self._interrupts()
            self._send(ev)
        if interrupted and now is not None:
            self._clear(now)

    def _configure(self, session: dict[str, Any]) -> None:
        audio_input = session.get("audio", {}).get("input", {})
        self._input_format = AudioFormat.from_wire(audio_input.get("format", PCM16_24K))
        self._turn_detection = audio_input.get("turn_detection")

    def _interrupts(self) -> bool:
        detection = self._turn_detection
        return detection is not None and bool(detection.get("interrupt_response", True)) and self.output.audible

    def _queue_audio(self, delta: dict[str, Any]) -> None:
        data = base64.b64decode(delta["delta"])
        samples = wire_audio.to_pcm24k(data, self._formats.get(delta["response_id"], PCM16_24K))
        self.output.push(delta["response_id"], delta["item_id"], samples)

    def _clear(self, now: float) -> None:
        """Drop unplayed audio: ``output_audio_buffer.cleared``, then truncate what was cut."""
        cleared = self.output.clear()
        if cleared.response_id is not None:
            self._send(event(self._ids, "output_audio_buffer.cleared", response_id=cleared.response_id))
        for item_id, played in cleared.cut:
            truncate = {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": played * 1000 // SAMPLE_RATE,
            }
            answer = self.engine.handle(truncate, now)
            # An item the client already deleted or truncated shorter is simply left alone.
            self._route([ev for ev in answer if ev["type"] != "error"], now)

