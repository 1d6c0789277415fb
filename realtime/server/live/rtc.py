"""Live over WebRTC: ``POST /v1/live/sessions`` (and ``…/{id}/fork``) answers an SDP offer with a session.

The request body is JSON: ``{"session": {...}, "transport": {"type": "webrtc", "sdp": offer}}``;
the answer is ``{"session": {"id"}, "transport": {"type": "webrtc", "sdp": answer}}``. The session
has started by then (the POST carries its configuration): ``session.started`` is the first event
on the data channel once the peer opens it. The caller's microphone track drives the timeline
(24 kHz after decoding, :meth:`LiveEngine.append_pcm`); the output track plays the engine's
output frames in real time and nothing else
(:class:`~voxline.realtime.transports.rtc_audio.QueuedAudioTrack`): no filler while the engine
has not rendered the next frame, so sample ``k`` of the track (its RTP clock from the first
packet) lies at ``k / 24`` ms on the session timeline, as on a WebSocket;
every other event goes to the data channel, filtered by the session's ``client.data_channel``
permissions, and to the sidebands. The peer closing its connection is ``remote_hangup``; a
connection that fails is ``connection_lost``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from typing import Any

import numpy as np
from aiortc import RTCConfiguration, RTCDataChannel, RTCPeerConnection
from aiortc.mediastreams import MediaStreamTrack

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.validate import a_kind, parse_json
from voxline.realtime.server.live.engine import CloseReason, LiveEngine, Out
from voxline.realtime.server.live.hub import LiveHub, LiveSession
from voxline.realtime.server.live.settings import LiveSettings
from voxline.realtime.server.net.config import ServerConfig, wire_text
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.net.hearer import failed
from voxline.realtime.server.net.voicer import SpeechSupplier
from voxline.realtime.server.net.rtc_offer import answer_offer, close_peer, offer_text, send_or_refuse
from voxline.realtime.transports.rtc_audio import QueuedAudioTrack, SampleQueue, pump_remote_audio

__all__ = ["LiveCall", "read_offer"]

log = logging.getLogger("voxline.server")

CHANNEL_TIMEOUT_S = 15.0


def read_offer(body: bytes) -> tuple[Any, str]:
    """The ``session`` (as sent; ``None`` when absent) and the SDP offer of a WebRTC request body."""
    data = parse_json(body or b"{}")
    if not isinstance(data, dict):
        raise RequestRejected(errors.not_an_object("a value of another type"))
    for key in data:
        if key not in ("session", "transport"):
            raise RequestRejected(errors.unknown_parameter(key))
    transport = data.get("transport")
    if transport is None:
        raise RequestRejected(errors.missing_parameter("transport"))
    if not isinstance(transport, dict):
        raise RequestRejected(errors.invalid_type("transport", "an object", a_kind(transport)))
    if transport.get("type") != "webrtc":
        raise RequestRejected(errors.invalid_choice("transport.type", transport.get("type"), ("webrtc",)))
    sdp = transport.get("sdp")
    if sdp is not None and not isinstance(sdp, str):
        raise RequestRejected(errors.invalid_type("transport.sdp", "a string", a_kind(sdp)))
    if not sdp or not sdp.strip():
        raise RequestRejected(errors.missing_parameter("transport.sdp"))
    try:
        offer = offer_text(sdp.encode("utf-8"))
    except ValueError as exc:
        raise RequestRejected(errors.invalid_value("transport.sdp", f"Invalid SDP offer: {exc}")) from None
    return data.get("session"), offer


class LiveCall:
    """One WebRTC Live session: create, :meth:`answer` the offer, then :meth:`run`."""

    def __init__(self, engine: LiveEngine, settings: LiveSettings, hub: LiveHub, config: ServerConfig, synth: Synth) -> None:
        self.engine = engine
        self._config = config
        self._hub = hub
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self._output = SampleQueue()
        self._track = QueuedAudioTrack(self._output, config.clock)
        self._channel: RTCDataChannel | None = None
        self._waiting: list[dict[str, Any]] = []  # events made before the channel opened
        self._mic: MediaStreamTrack | None = None
        self._opened = asyncio.Event()
        self._ended = asyncio.Event()
        self._end_reason: CloseReason = "remote_hangup"
        permissions = (settings.client or {}).get("data_channel") or {}
        self._allowed_in = _allowed(permissions.get("allowed_client_events"))
        self._allowed_out = _allowed(permissions.get("allowed_server_events"))
        self.session = LiveSession(engine, self._to_peer, on_wire=config.on_wire, on_closed=self._ended.set)
        self._voicer = SpeechSupplier(engine, synth, config.clock, lambda: None,
                                      lambda: self.session.route(failed(engine, "on a reply's speech")))
        self._started = engine.start(settings)
        self.pc.on("track", self._on_track)
        self.pc.on("datachannel", self._on_datachannel)
        self.pc.on("connectionstatechange", self._on_state)

    async def answer(self, offer: str) -> str:
        """Apply the offer, add the output track, and return the SDP answer."""
        answer = await answer_offer(self.pc, offer, self._track, "transport.sdp", self._dropped)
        self._hub.add(self.session)
        self.session.route(self._started)
        return answer

    def hangup(self) -> None:
        self.session.route(self.engine.close("close_requested"))

    async def run(self) -> None:
        """Serve the session until it closes or the peer leaves; then close the peer connection."""
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CHANNEL_TIMEOUT_S):
                    await first_of(self._opened.wait(), self._ended.wait())
            if not self._opened.is_set() and not self._ended.is_set():
                self._end_reason = "connection_lost"
                return
            async with asyncio.TaskGroup() as group:
                jobs = [group.create_task(self._voicer.run()), group.create_task(self._expire())]
                if self._mic is not None:
                    jobs.append(group.create_task(pump_remote_audio(self._mic, self._on_mic)))
                try:
                    await self._ended.wait()
                finally:
                    for job in jobs:
                        job.cancel()
        finally:
            if self.engine.closed is None:
                self.session.route(self.engine.close(self._end_reason))
            self.session.close_observers()
            self._hub.ended(self.session)
            await self._drain()
            await close_peer(self.pc)  # a peer that hung up has aiortc closing the connection too
            log.info("Live session %s ended (%s, WebRTC)", self.engine.session_id, self.engine.closed)

    # Peer connection callbacks.

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._mic is None:
            self._mic = track

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        if self._channel is not None:
            return
        self._channel = channel
        channel.on("message", self._on_message)
        channel.on("close", self._ended.set)
        waiting, self._waiting = self._waiting, []
        self._to_peer(waiting)
        self._opened.set()

    def _on_state(self) -> None:
        if self.pc.connectionState == "failed":
            self._end_reason = "connection_lost"
            self._ended.set()
        elif self.pc.connectionState == "closed":
            self._ended.set()

    def _on_message(self, message: str | bytes) -> None:
        if self._config.on_wire is not None:
            self._config.on_wire("in", wire_text(message))
        outs = self._refuse(message)
        if outs is None:
            try:
                outs = self.engine.receive(message, "primary", "webrtc")
            except Exception:  # a bug of ours must not end the caller's session
                log.exception("the Live engine failed on a data channel frame")
                outs = [self.engine.error(errors.server_error())]
        self.session.route(outs)
        self._voicer.check()

    def _dropped(self, _stream: int, limit: int) -> None:
        log.warning("Live session %s: dropped a data channel message of more than %d bytes", self.engine.session_id,
                    limit)
        self.session.route([self.engine.error(errors.message_dropped(limit))])

    def _refuse(self, message: str | bytes) -> list[Out] | None:
        """An error for a client event the data channel may not send (its permissions), else ``None``."""
        if self._allowed_in is None:
            return None
        try:
            kind = json.loads(message).get("type")
        except (ValueError, AttributeError):
            return None
        if kind in self._allowed_in:
            return None
        spec = ErrorSpec(f"The data channel may not send '{str(kind)[:80]}' in this session.", "event_not_allowed", "type")
        return [self.engine.error(spec)]

    def _on_mic(self, block: np.ndarray) -> None:
        self.session.route(self.engine.append_pcm(block))
        self._voicer.check()

    # Sending.

    def _to_peer(self, events: list[dict[str, Any]]) -> None:
        """Output audio to the media track; every other event to the data channel (once open)."""
        channel = self._channel
        for event in events:
            if event["type"] == "session.output_audio.delta":
                self._output.push(np.frombuffer(base64.b64decode(event["delta"]), dtype="<i2").astype(np.int16))
                self._track.wake()
                continue
            if self._allowed_out is not None and event["type"] not in self._allowed_out and event["type"] != "error":
                continue
            if channel is None:
                self._waiting.append(event)
            elif channel.readyState == "open":
                text = send_or_refuse(channel, json.dumps(event), str(event.get("type")),
                                      lambda spec: json.dumps(self.engine.error(spec).event))
                if text is None:  # the channel closed, or takes nothing this server sends: the session is over
                    self._ended.set()
                    return
                if self._config.on_wire is not None:
                    self._config.on_wire("out", text)

    async def _drain(self) -> None:
        channel = self._channel
        if channel is None or channel.readyState != "open" or channel.bufferedAmount == 0:
            return
        drained = asyncio.Event()
        channel.bufferedAmountLowThreshold = 0
        channel.once("bufferedamountlow", drained.set)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await drained.wait()

    async def _expire(self) -> None:
        await self._config.clock.sleep(self.engine.config.max_session_s)
        self.session.route(self.engine.close("expired"))


def _allowed(selectors: Any) -> frozenset[str] | None:
    """Event types a permission list allows (``None``: all)."""
    if selectors is None or selectors == "all":
        return None
    return frozenset(s if isinstance(s, str) else str(s.get("type")) for s in selectors if isinstance(s, (str, dict)))

