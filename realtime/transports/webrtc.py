"""WebRTC transport (aiortc): events on the ``oai-events`` data channel, audio on media tracks.

:meth:`WebRTCTransport.connect` creates a peer connection (no ICE servers when the
peer is on loopback, aiortc's default otherwise), the ``oai-events`` data channel
and an outgoing audio track, POSTs the SDP offer to ``{base}/realtime/calls``
(:mod:`.rtc_signaling`), applies the answer and waits for the channel to open; an answer
that rejects the audio or the data channel, or would not carry the audio both ways, is refused
before it is applied (:func:`.rtc_sdp.answer_problem`); a peer
connection that fails first (no ICE pair, a DTLS handshake that fails) is a ConnectionFailed
naming that, at once.

Then it is a :class:`~voxline.realtime.transports.base.Transport` over the data channel:
``send``/``recv`` move whole JSON text frames, and the end of the channel or of the
peer connection becomes :class:`~voxline.realtime.errors.ConnectionClosed` (code 1006: WebRTC
has no close frame). Audio goes around the event stream (docs/protocol.md §2): the
microphone is whatever is given to :meth:`WebRTCTransport.push_audio` (int16 mono
24 kHz, sent in real time from the first block pushed, one frame behind it, with silence
when the queue runs dry), and the assistant's
voice arrives on the remote track, decoded to int16 mono 24 kHz blocks handed to
``on_audio``. There is no ``input_audio_buffer.append`` and no
``response.output_audio.delta``: the server owns the output buffer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack

from voxline.base.redaction import install_log_redaction, redact_url, scrub
from voxline.base.shown import clip
from voxline.base.urls import is_loopback_url

from ..errors import ConnectionClosed, ConnectionFailed
from ..frames import DroppedFrame, check_fits
from .rtc_audio import MicrophoneTrack, SampleQueue, pump_remote_audio
from .rtc_reassembly import cap_incoming_messages
from .rtc_text import read_text_as_browsers_do
from .failures import MESSAGE_CHARS
from .http import split_userinfo
from .rtc_sdp import (DEFAULT_MAX_MESSAGE, SDP_FAILURES, answer_problem, connects_of, max_message_problem,
                      peer_max_message, reap_connects)
from .rtc_signaling import EVENTS_LABEL, Answer, call_id_problem, calls_url, post_offer
from voxline.base.models import DEFAULT_REALTIME_MODEL

__all__ = ["AudioHandler", "WebRTCTransport"]

log = logging.getLogger("voxline.realtime")

AudioHandler = Callable[[npt.NDArray[np.int16]], None]
Offerer = Callable[[str, str, str, float], Awaitable[Answer]]  # (url, token, offer SDP, timeout) → the answer
"""Receives each block of the assistant's voice: int16 mono 24 kHz."""

_HIGH_WATER = 1024 * 1024  # bytes waiting in the data channel before send() waits
_LOW_WATER = 256 * 1024
_REMOTE_CLOSED = (1006, "the WebRTC peer connection ended")
MAX_UNREAD = 64 * 1024 * 1024
"""Events the server sent that the session has not read yet, at most: their characters, and :data:`MESSAGE_COST`
a message. A data channel has no way to make its sender wait (a WebSocket stops reading, and TCP holds the server
back): a server that sends faster than the session reads, for ever, ends the call here rather than the process's
memory."""
MESSAGE_COST = 64
"""What a message costs the inbox beside its characters (the string object and its place in the queue): an empty
message, which aiortc hands over as ``""``, is not free."""

install_log_redaction()  # now that aiortc's module loggers exist


async def _post_offer(url: str, token: str, offer_sdp: str, timeout: float) -> Answer:
    return await post_offer(url, token, offer_sdp, timeout=timeout)


class WebRTCTransport:
    """A Realtime call over WebRTC; create with :meth:`connect`."""

    def __init__(self, pc: RTCPeerConnection, url: str) -> None:
        self._pc = pc
        self.url = url
        self.call_id: str | None = None
        self.max_message_bytes: int | None = DEFAULT_MAX_MESSAGE  # the answer's a=max-message-size, once applied
        self.close_code: int | None = None
        self.close_reason = ""
        self._mic = SampleQueue()
        self._mic_track = MicrophoneTrack(self._mic)
        self._remote: MediaStreamTrack | None = None
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._unread = 0  # the inbox's events, as MAX_UNREAD counts them
        self._tasks: list[asyncio.Task[None]] = []
        self._connects: set[asyncio.Task[Any]] = set()  # aiortc's connect tasks: heard if the call is given up on
        self._settled = asyncio.Event()  # the channel opened or the connection ended: a connect waits no longer
        self._drained = asyncio.Event()
        self._token = ""
        self._offer: Offerer = _post_offer
        pc.addTrack(self._mic_track)
        self._channel = pc.createDataChannel(EVENTS_LABEL)
        read_text_as_browsers_do(pc)  # one malformed text message is one malformed event, not a lost connection
        cap_incoming_messages(pc, self._on_oversize)  # nor is one larger than this end takes: it is dropped, said
        self._channel.bufferedAmountLowThreshold = _LOW_WATER
        self._channel.on("open", self._on_open)
        self._channel.on("message", self._on_message)
        self._channel.on("close", lambda: self._lost(*_REMOTE_CLOSED))
        self._channel.on("bufferedamountlow", self._drained.set)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)

    def __repr__(self) -> str:
        state = "open" if self.close_code is None else f"closed {self.close_code}"
        return f"<WebRTCTransport {redact_url(self.url)} call={self.call_id} {state}>"

    @classmethod
    async def connect(
        cls,
        base_url: str,
        token: str,
        *,
        model: str | None = DEFAULT_REALTIME_MODEL,
        audio_source: AsyncIterable[npt.NDArray[np.int16]] | None = None,
        on_audio: AudioHandler | None = None,
        open_timeout: float = 10.0,
        url: str | None = None,
        offer: Offerer | None = None,
    ) -> WebRTCTransport:
        """Open a call: offer, answer, data channel open; then audio flows both ways.

        ``audio_source`` (optional) is read in the background into :meth:`push_audio`;
        ``on_audio`` gets the remote track's audio. Raises ConnectionFailed. ``url`` and ``offer``
        (``offer(url, token, sdp, timeout)`` → :class:`Answer`) sign a call up elsewhere than
        ``/v1/realtime/calls``, as GPT-Live's ``POST /v1/live/sessions`` does.
        """
        url = url or calls_url(base_url, model=model)
        token = token or split_userinfo(base_url)[1]  # the configured key wins over the URL's userinfo
        local = is_loopback_url(url)
        transport = cls(RTCPeerConnection(RTCConfiguration(iceServers=[]) if local else RTCConfiguration()), url)
        if offer is not None:
            transport._offer = offer
        try:
            await transport._open(token, open_timeout)
        except BaseException:
            reap_connects(transport._connects)  # the peer, closed meanwhile, failed its connects
            raise
        log.info("connected to %s (WebRTC call %s)", redact_url(url), transport.call_id)
        transport._start(on_audio, audio_source)
        return transport

    async def _open(self, token: str, open_timeout: float) -> None:
        """:meth:`_negotiate` within ``open_timeout``; failed or given up on, the peer connection is closed."""
        url = self.url
        try:
            async with asyncio.timeout(open_timeout):
                await self._negotiate(token, open_timeout)
        except TimeoutError:
            await self._pc.close()
            log.info("WebRTC call to %s did not open within %g s", redact_url(url), open_timeout)
            raise ConnectionFailed(f"the WebRTC call to {url} did not open within {open_timeout:g} s") from None
        except BaseException as exc:  # ConnectionFailed, or the caller gave up: never leave the peer connection open
            await self._pc.close()
            if isinstance(exc, ConnectionFailed):
                log.info("connect failed: %s", exc)  # already redacted: a VoxlineError
            raise

    async def _negotiate(self, token: str, timeout: float) -> None:
        pc = self._pc
        self._token = token.strip()  # as it is sent (HTTP drops the whitespace), and so as a server echoes it
        offer = await pc.createOffer()
        before = asyncio.all_tasks()
        await pc.setLocalDescription(offer)
        self._connects |= connects_of(pc, asyncio.all_tasks() - before)
        answer = await self._offer(self.url, token, pc.localDescription.sdp, timeout)
        if (problem := call_id_problem(answer.call_id, token)) is not None:  # not shown: it may be anything
            raise ConnectionFailed(f"{redact_url(self.url)} named the call with an unusable id ({problem})")
        self.call_id = answer.call_id
        if (problem := answer_problem(answer.sdp)) is not None:  # aiortc would connect it, then carry nothing
            raise ConnectionFailed(f"{redact_url(self.url)} sent an unusable SDP answer ({problem})")
        try:
            before = asyncio.all_tasks()
            await pc.setRemoteDescription(RTCSessionDescription(answer.sdp, "answer"))
            self._connects |= connects_of(pc, asyncio.all_tasks() - before)
        except SDP_FAILURES as exc:  # aiortc's parser asserts, indexes and unpacks unchecked
            why = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} in aiortc's SDP parser"
            raise ConnectionFailed(f"{redact_url(self.url)} sent an unusable SDP answer ({clip(why, MESSAGE_CHARS)})") from None
        self.max_message_bytes = peer_max_message(answer.sdp)
        if (problem := max_message_problem(self.max_message_bytes)) is not None:
            raise ConnectionFailed(f"{redact_url(self.url)} sent an unusable SDP answer ({problem})")
        await self._settled.wait()
        if self.close_code is not None:  # failed before (or as) the channel opened: at once, with the reason
            raise ConnectionFailed(f"the WebRTC call to {redact_url(self.url)} failed: {self._failure()}")

    def _failure(self) -> str:
        """Why the peer connection ended while connecting, as far as its transports tell."""
        pc = self._pc
        if pc.iceConnectionState == "failed":
            return "no ICE candidate pair connected (the answer's candidates are unreachable, or there are none)"
        dtls = [t.sender.transport for t in pc.getTransceivers()] + ([pc.sctp.transport] if pc.sctp else [])
        if any(t.state == "failed" for t in dtls):
            return "the DTLS handshake failed (the answer's certificate fingerprint does not match the peer's?)"
        return f"the peer connection went {pc.connectionState} before the data channel opened"

    def _start(self, on_audio: AudioHandler | None, source: AsyncIterable[npt.NDArray[np.int16]] | None) -> None:
        if self._remote is not None:
            sink, remote = on_audio or (lambda _block: None), self._remote
            self._tasks.append(asyncio.create_task(self._guard(lambda: pump_remote_audio(remote, sink), "on_audio")))
        if source is not None:
            self._tasks.append(asyncio.create_task(self._guard(lambda: self._feed(source), "audio_source")))

    # Audio.

    @property
    def media(self) -> WebRTCTransport:
        """The microphone goes out on this connection's audio track (:meth:`push_audio`)."""
        return self

    def push_audio(self, block: npt.ArrayLike, *, age_s: float = 0.0) -> None:
        """Queue microphone audio (1-D int16, 24 kHz mono) whose last sample was captured ``age_s``
        ago; the track sends it in real time, each frame one frame after it was captured."""
        queued = self._mic.queued
        self._mic.push(block)
        self._mic_track.pushed(self._mic.queued - queued, age_s)

    @property
    def queued_audio_samples(self) -> int:
        """Microphone samples pushed and not yet sent."""
        return self._mic.queued

    def take_padding(self) -> int:
        """Silence the microphone track sent since the last call, for want of samples pushed in time."""
        padded, self._mic.padded = self._mic.padded, 0
        return padded

    async def _feed(self, source: AsyncIterable[npt.NDArray[np.int16]]) -> None:
        async for block in source:
            self.push_audio(block)

    async def _guard(self, job: Callable[[], Awaitable[None]], what: str) -> None:
        """Run an audio job; its failure ends the connection (seen as ConnectionClosed 1011).

        ``job`` makes the coroutine only once the task runs: a transport closed before then
        leaves no coroutine that was never awaited."""
        try:
            await job()
        except Exception as exc:
            self._lost(1011, f"{what} failed: {type(exc).__name__}: {exc}")

    # Transport.

    async def send(self, text: str) -> None:
        """Send one text frame on the data channel; waits while much is still buffered."""
        while self.close_code is None and self._channel.bufferedAmount > _HIGH_WATER:
            self._drained.clear()
            await self._drained.wait()
        if self.close_code is not None or self._channel.readyState != "open":
            raise ConnectionClosed(*self._close_args())
        if self.max_message_bytes is not None:  # the protocol core refused it already; not another way round it
            check_fits(text, "an event", self.max_message_bytes)
        self._channel.send(text)

    async def recv(self) -> str:
        """The next text frame; raises ConnectionClosed once the call ended and all was read."""
        if self.close_code is not None and self._inbox.empty():
            raise ConnectionClosed(self.close_code, self.close_reason)
        item = await self._inbox.get()
        if item is None:
            self._inbox.put_nowait(None)  # later recv() calls see the end too
            raise ConnectionClosed(*self._close_args())
        self._unread -= len(item) + MESSAGE_COST
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Hang up: stop the audio jobs and close the peer connection. Idempotent."""
        if self.close_code is None:
            self._lost(code, reason)
        self._mic_track.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._pc.close()

    # Callbacks.

    def _on_message(self, message: str | bytes) -> None:
        if self.close_code is not None:  # recv() says the call ended: nothing that comes after is read
            return
        text = message if isinstance(message, str) else message.decode("utf-8", "replace")
        self._take(scrub(text, self._token))  # a server may echo our token, e.g. in an error

    def _on_oversize(self, _stream: int, limit: int) -> None:
        if self.close_code is not None:  # as for a message: nothing that comes after the end is read
            return
        log.info("dropped a data channel message of more than %d bytes from %s", limit, redact_url(self.url))
        self._take(DroppedFrame(
            f"a data channel message of more than the {limit} bytes this end takes (its a=max-message-size) was "
            "dropped unread"))

    def _take(self, text: str) -> None:
        """Into the inbox; past :data:`MAX_UNREAD` unread, the call ends instead (what came before is read)."""
        cost = len(text) + MESSAGE_COST
        if self._unread + cost > MAX_UNREAD:
            log.warning("%s sent more than %d MiB of events the session had not read: the call ends",
                        redact_url(self.url), MAX_UNREAD // 2**20)
            self._lost(1008, f"the server sent more than {MAX_UNREAD // 2**20} MiB of events faster than the session "
                             "read them")
            return
        self._unread += cost
        self._inbox.put_nowait(text)

    def _on_open(self) -> None:
        self._settled.set()

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._remote is None:
            self._remote = track

    def _on_state(self) -> None:
        if self._pc.connectionState in ("failed", "closed"):
            self._lost(*_REMOTE_CLOSED)

    def _lost(self, code: int, reason: str) -> None:
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
            self._inbox.put_nowait(None)
            self._drained.set()
            self._settled.set()

    def _close_args(self) -> tuple[int, str]:
        return (self.close_code or _REMOTE_CLOSED[0], self.close_reason if self.close_code else _REMOTE_CLOSED[1])
