"""One WebRTC call on the local server: the peer connection pumping a :class:`CallBridge`.

The call owns its ``RTCPeerConnection``. Before the SDP answer is made it hooks the
client's microphone track and the ``oai-events`` data channel; the answer
(:func:`~voxline.realtime.server.net.rtc_offer.answer_offer`) adds its outgoing track,
which plays the output buffer. The call *opens* (``session.created``, before any client
frame is handled) at the first of: the channel arriving, the peer connecting when its offer has
no data section (a caller that made no channel is served by its sidebands), a sideband attaching. A channel that arrives
after that gets the opening events alone, as a late sideband does.
:meth:`RtcCall.run` waits for the channel or the connection, then runs its jobs until the peer goes
away: the microphone reader, a pacer that polls the engine when its next step is
due (as over WebSocket), a voicer that synthesizes the replies a response waits for
off the event loop, and the session-length timer. Client frames are handled
as they arrive, in the channel's callback. The engine raising (a bug of ours) on a frame, the caller's audio, a
scheduled step, a reply's speech or words heard is one ``server_error`` event (a sideband's frame: to that sideband),
and the call goes on, as a WebSocket session does.

Sideband sockets (:mod:`voxline.realtime.server.net.sideband`) may :meth:`RtcCall.attach` at any
time: each gets ``session.created`` / ``conversation.created`` first (the call opens if it had
not), then every event of the call; its frames are handled like the channel's. A call whose peer
neither connects nor opens a channel within :data:`CHANNEL_TIMEOUT_S` ends. :meth:`RtcCall.hangup` ends the call, as the peer leaving does; either way
the sidebands close with 1000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aiortc import RTCDataChannel, RTCPeerConnection
from aiortc.mediastreams import MediaStreamTrack

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.rtc_bridge import CallBridge
from voxline.realtime.server.engine.rtc_output import Samples
from voxline.realtime.server.engine.speech import Synth
from voxline.realtime.server.engine.wire_json import encode_event
from voxline.realtime.server.net.config import ServerConfig, wire_text
from voxline.realtime.server.net.rtc_offer import close_peer, send_or_refuse
from voxline.realtime.server.net.sideband import Sideband
from voxline.realtime.server.net.ws_session import close_reason
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.hearing.ears import Ears
from voxline.realtime.server.net.hearer import HearingSupplier, failed
from voxline.realtime.server.net.voicer import SpeechSupplier
from voxline.realtime.transports.rtc_audio import PacedAudioTrack, pump_remote_audio
from voxline.realtime.transports.rtc_signaling import EVENTS_LABEL

__all__ = ["RtcCall"]

log = logging.getLogger("voxline.server")

CHANNEL_TIMEOUT_S = 15.0
DRAIN_TIMEOUT_S = 1.0


class RtcCall:
    """One call; create it, answer the offer with its :attr:`output_track`, then :meth:`run`."""

    def __init__(
        self, call_id: str, pc: RTCPeerConnection, engine: Engine, config: ServerConfig, synth: Synth,
        ears: Ears | None = None,
    ) -> None:
        self.call_id = call_id
        self.pc = pc
        self._config = config
        self._engine = engine
        self.bridge = CallBridge(engine, self._send, engine.ids.derived())  # each call's own, seeded or not
        self._channel: RTCDataChannel | None = None
        self._reached = asyncio.Event()  # the channel arrived, or the peer connected
        self._mic: MediaStreamTrack | None = None
        self._ended = asyncio.Event()
        self._opened = False
        self._sidebands: list[Sideband] = []
        self._wakeup = asyncio.Event()
        self._voicer = SpeechSupplier(engine, synth, config.clock, self._wakeup.set,
                                      lambda: self._failed("on a reply's speech"))
        self._hearer = HearingSupplier(engine, ears, config.clock, self._heard)
        self.output_track = PacedAudioTrack(self.bridge.read_output, config.clock)  # the output buffer, in real time
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        pc.on("connectionstatechange", self._on_state)

    def __repr__(self) -> str:
        return f"<RtcCall {self.call_id} {self.pc.connectionState}>"

    async def run(self) -> None:
        """Serve the call until the peer leaves (or never connects); then close it."""
        started = self._config.clock.now()
        log.info("session %s opened (WebRTC call %s)", self._engine.session_id, self.call_id)
        try:
            try:
                async with asyncio.timeout(CHANNEL_TIMEOUT_S):
                    await first_of(self._reached.wait(), self._ended.wait())
            except TimeoutError:
                return
            if self._ended.is_set():
                return
            async with asyncio.TaskGroup() as group:
                jobs = [
                    group.create_task(self._pace()),
                    group.create_task(self._voicer.run()),
                    group.create_task(self._hearer.run()),
                    group.create_task(self._expire()),
                ]
                if self._mic is not None:
                    jobs.append(group.create_task(pump_remote_audio(self._mic, self._on_mic)))
                try:
                    await self._ended.wait()
                finally:
                    for job in jobs:
                        job.cancel()
        finally:
            for sideband in self._sidebands:
                sideband.close()
            self._sidebands = []
            await close_peer(self.pc)
            log.info("session %s closed (WebRTC call %s) after %.1f s", self._engine.session_id, self.call_id,
                     self._config.clock.now() - started)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def hangup(self) -> None:
        """End the call (``POST /v1/realtime/calls/{id}/hangup``); :meth:`run` then closes everything."""
        self._ended.set()

    async def attach(self, sideband: Sideband) -> None:
        """Serve one sideband socket until it or the call closes."""
        if self._ended.is_set():
            sideband.close()
        else:
            self._sidebands.append(sideband)
            if self._opened:  # it missed the opening events: they are sent to it alone
                for ev in self.bridge.engine.open():
                    self._deliver(sideband, encode_event(ev))
            else:  # its frames are handled from now on: the session opens first
                self._open()
        try:
            await sideband.run(lambda frame: self._on_message(frame, sideband))
        finally:
            if sideband in self._sidebands:
                self._sidebands.remove(sideband)

    # Peer connection callbacks.

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._mic is None:
            self._mic = track

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        if channel.label != EVENTS_LABEL or self._channel is not None:
            return
        self._channel = channel
        channel.on("message", self._on_message)
        channel.on("close", self._ended.set)
        if self._opened:  # opened before it came (the peer connected first, a sideband): the opening for it alone
            for ev in self.bridge.engine.open():
                self._send_on_channel(channel, ev)
        else:
            self._open()
        self._reached.set()

    def _on_state(self) -> None:
        state = self.pc.connectionState
        if state in ("failed", "closed"):
            self._ended.set()
        elif state == "connected" and not self._offers_channel():
            self._open()  # a caller that made no channel is served by its sidebands
            self._reached.set()

    def _offers_channel(self) -> bool:
        """The caller's offer has a data section: its channel is to come (over the connection just made)."""
        offer = self.pc.remoteDescription
        return offer is not None and any(line.startswith("m=application") for line in offer.sdp.splitlines())

    def _open(self) -> None:
        """``session.created`` and ``conversation.created`` to whoever is there, once, before any client frame."""
        if not self._opened:
            self._opened = True
            self.bridge.open()

    def _on_message(self, message: str | bytes, sideband: Sideband | None = None) -> None:
        if self._config.on_wire is not None:
            self._config.on_wire("in", wire_text(message))
        reply = None if sideband is None else (lambda ev: self._deliver(sideband, encode_event(ev)))
        try:
            self.bridge.client_frame(message, self._config.clock.now(), reply)
        except Exception:  # a bug of ours must not end the call: said (to that sideband alone), and the call goes on
            self._failed("on a client frame", reply)
        ended, self._engine.closing = self._engine.closing, None  # the call goes on; only that socket is closed
        if ended is not None and sideband is not None:
            sideband.close(4000, close_reason(ended))
        self._voicer.check()
        self._hearer.check()
        self._wakeup.set()

    def dropped(self, _stream: int, limit: int) -> None:
        """A caller's message larger than this end takes was dropped unread: said in the log and to the caller."""
        log.warning("session %s: dropped a data channel message of more than %d bytes (WebRTC call %s)",
                    self._engine.session_id, limit, self.call_id)
        channel = self._channel
        if channel is not None:
            self._send_on_channel(channel, self._engine.error(errors.message_dropped(limit)))

    def _on_mic(self, block: Samples) -> None:
        try:
            self.bridge.microphone(block, self._config.clock.now())
        except Exception:  # as on a client frame
            self._failed("on the caller's audio")
        self._voicer.check()
        self._hearer.check()
        self._wakeup.set()

    def _heard(self, events: list[dict[str, Any]]) -> None:
        self.bridge.deliver(events, self._config.clock.now())
        self._voicer.check()
        self._wakeup.set()

    def _failed(self, where: str, reply: Callable[[dict[str, Any]], None] | None = None) -> None:
        """The engine raised (a bug of ours; called in the ``except`` block): one ``server_error``, as the service
        says it, to ``reply`` if a sideband's frame caused it, else to the whole call."""
        events = failed(self._engine, where)
        if reply is not None:
            reply(events[0])
        else:
            self.bridge.deliver(events, self._config.clock.now())

    def _send(self, ev: dict[str, Any]) -> None:
        text = encode_event(ev)
        channel = self._channel
        if channel is not None:  # after it closes the call is over
            self._send_on_channel(channel, ev, text)
        for sideband in self._sidebands:  # a sideband's WebSocket carries the event itself, whatever the channel took
            self._deliver(sideband, text)

    def _send_on_channel(self, channel: RTCDataChannel, ev: dict[str, Any], text: str | None = None) -> None:
        if channel.readyState != "open":
            return
        text = encode_event(ev) if text is None else text
        sent = send_or_refuse(channel, text, str(ev.get("type")), lambda spec: encode_event(self._engine.error(spec)))
        if sent is None:  # the channel closed, or takes nothing this server sends: the call is over
            self._ended.set()
        elif self._config.on_wire is not None:
            self._config.on_wire("out", sent)

    def _deliver(self, sideband: Sideband, text: str) -> None:
        sideband.push(text)
        if self._config.on_wire is not None:
            self._config.on_wire("out", text)

    # Jobs.

    async def _pace(self) -> None:
        clock = self._config.clock
        while True:
            self._wakeup.clear()
            due = self.bridge.engine.next_due()
            if due is None or due == self.bridge.failed_at:
                await self._wakeup.wait()
                continue
            delay = due - clock.now()
            if delay > 0:
                await first_of(clock.sleep(delay), self._wakeup.wait())
                continue
            try:
                self.bridge.poll(clock.now())
            except Exception:  # as over WebSocket: said, and the call goes on
                self._failed("on a scheduled step")
            self._voicer.check()
            self._hearer.check()

    async def _expire(self) -> None:
        await self._config.clock.sleep(self._config.max_session_s)
        self.bridge.expire()
        channel = self._channel
        if channel is not None and channel.bufferedAmount > 0:
            drained = asyncio.Event()
            channel.bufferedAmountLowThreshold = 0
            channel.once("bufferedamountlow", drained.set)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_TIMEOUT_S):
                    await drained.wait()
        self._ended.set()


