"""WebRTC: voxline's client transport against the local server's ``/v1/realtime/calls``, on loopback.

Events travel on the ``oai-events`` data channel, the microphone and the assistant's voice on
Opus media tracks. Every data-channel frame, in both directions and on both ends, is validated
by the oracle (the official SDK's event types). Plus plain-number tests of the server's output
buffer and of the transport's helpers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from openai import AsyncOpenAI

from voxline.audio.synth import synthesize
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.net.rtc_offer import close_peer
from voxline.realtime.server.engine.rtc_output import Cleared, OutputAudioBuffer, Started, Stopped
from voxline.realtime.transports import Transport
from voxline.base.clock import VirtualClock
from voxline.realtime.transports.rtc_audio import (
    MicrophoneTrack,
    QueuedAudioTrack,
    LEAD_S,
    RemoteAudioDecoder,
    SampleQueue,
    audio_frame,
)
from voxline.base.urls import is_loopback_url
from voxline.realtime.transports.failures import MESSAGE_CHARS
from voxline.realtime.transports.rtc_sdp import answer_problem
from voxline.realtime.transports.rtc_signaling import Answer, calls_url, post_offer
from voxline.realtime.transports.webrtc import WebRTCTransport
from tests.support.oracle import WireRecorder
from tests.support.rtc_raw import send_raw_text

RATE = 24_000
KEY = "sk-webrtc-test"
SHORT = "Hello from the local server."
LONG = "This is a long reply that keeps talking for a few seconds so that it can be interrupted midway."
LOUD = 300  # int16 level that counts as sound (the tone voice peaks near 10 000)


def scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "reply.toml"
    path.write_text(f'name = "webrtc"\nafter_last = "repeat_last"\n[[turns]]\nsay = "{text}"\n', encoding="utf-8")
    return path


def loud_seconds(audio: np.ndarray) -> float:
    """Length from the first to the last loud sample."""
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > LOUD)
    return 0.0 if loud.size == 0 else (loud[-1] - loud[0] + 1) / RATE


def quiet_tail_seconds(audio: np.ndarray) -> float:
    """Length of the quiet stretch after the last loud sample."""
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > LOUD)
    return len(audio) / RATE if loud.size == 0 else (len(audio) - 1 - loud[-1]) / RATE


class Peer:
    """The client end: raw frames over the WebRTC transport (recorded), plus the audio of the remote track."""

    transport: WebRTCTransport

    def __init__(self, wire: WireRecorder) -> None:
        self.wire = wire
        self.heard: list[np.ndarray] = []
        self.grew = asyncio.Event()

    def on_audio(self, block: np.ndarray) -> None:
        self.heard.append(block)
        self.grew.set()

    @property
    def audio(self) -> np.ndarray:
        return np.concatenate(self.heard) if self.heard else np.zeros(0, np.int16)

    async def send(self, event: dict[str, Any]) -> None:
        text = json.dumps(event)
        self.wire("out", text)
        await self.transport.send(text)

    async def until(self, type_: str) -> list[dict[str, Any]]:
        """Server events up to and including the first of ``type_``."""
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(15):
            while True:
                text = await self.transport.recv()
                self.wire("in", text)
                seen.append(json.loads(text))
                if seen[-1]["type"] == type_:
                    return seen

    async def audio_until(self, predicate: Callable[[np.ndarray], bool]) -> None:
        """Wait (at the track's own pace) until the heard audio satisfies ``predicate``."""
        async with asyncio.timeout(15):
            while not predicate(self.audio):
                self.grew.clear()
                await self.grew.wait()


@asynccontextmanager
async def call(
    tmp_path: Path, text: str = SHORT, source: AsyncIterator[np.ndarray] | None = None, **overrides: Any
) -> AsyncIterator[tuple[Peer, WireRecorder]]:
    """A server with one reply and a connected client; both ends' frames are validated on exit."""
    client_wire, server_wire = WireRecorder(), WireRecorder()

    def on_server_wire(direction: str, text: str) -> None:
        server_wire("out" if direction == "in" else "in", text)  # the server's "in" is a client event

    settings: dict[str, Any] = {"port": 0, "voice": "tone", "speed": float("inf"), "api_key": KEY,
                                "scenario": scenario(tmp_path, text), "on_wire": on_server_wire}
    async with serve(ServerConfig(**{**settings, **overrides})) as server:
        peer = Peer(client_wire)
        peer.transport = await WebRTCTransport.connect(
            server.http_url, KEY, on_audio=peer.on_audio, audio_source=source
        )
        try:
            await peer.until("conversation.created")
            yield peer, client_wire
        finally:
            await peer.transport.close()
    client_wire.verify()
    server_wire.verify()
    assert client_wire.frames and server_wire.frames


async def say(peer: Peer, text: str = "hi") -> None:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    await peer.send({"type": "conversation.item.create", "item": item})
    await peer.send({"type": "response.create"})


def first(events: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(e for e in events if e["type"] == type_)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# ---------------------------------------------------------------- client ↔ server over loopback


async def test_session_update_through_a_realtime_connection(tmp_path: Path) -> None:
    recorder = WireRecorder()
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        transport = await WebRTCTransport.connect(server.http_url, KEY)
        assert isinstance(transport, Transport)
        assert (transport.call_id or "").startswith("rtc_")  # the Location header's last segment
        async with RealtimeConnection(transport, on_wire=recorder) as conn:
            vad = {"type": "server_vad", "silence_duration_ms": 400}
            conn.protocol.update_session({"type": "realtime", "instructions": "Be brief.",
                                          "audio": {"input": {"turn_detection": vad}}})
            await conn.flush()
            async with asyncio.timeout(10):
                while getattr(out := await conn.recv(), "type", None) != "session.updated":
                    pass
            assert out.session.instructions == "Be brief."
            assert conn.protocol.session["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 400
    recorder.verify()
    assert recorder.types("in") == {"session.created", "conversation.created", "session.updated"}
    assert recorder.types("out") == {"session.update"}


@pytest.mark.slow
async def test_reply_audio_arrives_on_the_remote_track(tmp_path: Path) -> None:
    expected_s = loud_seconds(synthesize(SHORT, "tone"))
    async with call(tmp_path) as (peer, client_wire):
        await say(peer)
        events = await peer.until("output_audio_buffer.stopped")
        await peer.audio_until(lambda a: loud_seconds(a) > 0 and quiet_tail_seconds(a) > 0.2)
    kinds = types(events)
    assert kinds.index("response.created") < kinds.index("output_audio_buffer.started")
    assert kinds.index("response.done") < kinds.index("output_audio_buffer.stopped")  # played in real time
    done = first(events, "response.done")
    assert done["response"]["status"] == "completed"
    assert first(events, "output_audio_buffer.started")["response_id"] == done["response"]["id"]
    assert first(events, "output_audio_buffer.stopped")["response_id"] == done["response"]["id"]
    assert loud_seconds(peer.audio) == pytest.approx(expected_s, abs=0.05)
    assert "response.output_audio.delta" not in client_wire.types("in")  # the audio went on the track
    assert {"response.output_audio.done", "response.output_audio_transcript.done"} <= client_wire.types("in")


@pytest.mark.slow
async def test_a_placeholder_reply_is_voiced_by_the_call_and_played(tmp_path: Path) -> None:
    expected_s = loud_seconds(synthesize("You said good morning.", "tone"))
    async with call(tmp_path, "You said {user_text}.") as (peer, _client_wire):
        await say(peer, "good morning")
        events = await peer.until("output_audio_buffer.stopped")
        await peer.audio_until(lambda a: loud_seconds(a) > 0 and quiet_tail_seconds(a) > 0.2)
    assert first(events, "response.output_audio_transcript.done")["transcript"] == "You said good morning."
    assert first(events, "response.done")["response"]["status"] == "completed"
    assert loud_seconds(peer.audio) == pytest.approx(expected_s, abs=0.05)


@pytest.mark.slow
async def test_cancel_and_clear_stop_the_audio_mid_reply(tmp_path: Path) -> None:
    full_s = loud_seconds(synthesize(LONG, "tone"))
    async with call(tmp_path, LONG, speed=2.0) as (peer, client_wire):
        await say(peer)
        await peer.until("output_audio_buffer.started")
        await peer.audio_until(lambda a: loud_seconds(a) >= 1.0)
        await peer.send({"type": "response.cancel"})
        await peer.send({"type": "output_audio_buffer.clear"})
        events = await peer.until("output_audio_buffer.cleared")
        events += await peer.until("conversation.item.truncated")
        at_clear = len(peer.audio)
        await peer.audio_until(lambda a: len(a) >= at_clear + RATE)  # one more second of track time
    done = first(events, "response.done")
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "client_cancelled"
    assert first(events, "output_audio_buffer.cleared")["response_id"] == done["response"]["id"]
    truncated = first(events, "conversation.item.truncated")
    assert 1000 <= truncated["audio_end_ms"] < (full_s - 1.0) * 1000  # cut where the server's playout was
    assert np.abs(peer.audio[at_clear + RATE // 2 :]).max() <= LOUD  # the track went quiet
    assert loud_seconds(peer.audio) < full_s - 1.0
    assert "output_audio_buffer.stopped" not in client_wire.types("in")


@pytest.mark.slow
async def test_speech_on_the_microphone_track_triggers_server_vad(tmp_path: Path) -> None:
    speech = synthesize("Hello there, what is the weather like today?", "tone")
    configured = asyncio.Event()

    async def microphone() -> AsyncIterator[np.ndarray]:  # read by the transport into its track
        await configured.wait()
        for block in (np.zeros(RATE // 2, np.int16), speech, np.zeros(RATE, np.int16)):
            yield block

    async with call(tmp_path, source=microphone()) as (peer, _client_wire):
        # 500 ms of silence ends the turn (the service's default is 200, shorter than the voice's pauses).
        vad = {"type": "server_vad", "silence_duration_ms": 500}
        await peer.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {"turn_detection": vad}}}})
        await peer.until("session.updated")
        configured.set()
        events = await peer.until("input_audio_buffer.speech_started")
        events += await peer.until("input_audio_buffer.speech_stopped")
        events += await peer.until("response.created")  # create_response is on by default
    start, stop = first(events, "input_audio_buffer.speech_started"), first(events, "input_audio_buffer.speech_stopped")
    assert start["item_id"] == stop["item_id"]
    assert first(events, "input_audio_buffer.committed")["item_id"] == start["item_id"]
    # prefix padding (300 ms) + the loud part of the speech + silence duration (500 ms), give or take the codec
    spoken_ms = stop["audio_end_ms"] - start["audio_start_ms"] - 300 - 500
    assert spoken_ms == pytest.approx(loud_seconds(speech) * 1000, abs=120)


@pytest.mark.slow
async def test_barge_in_by_voice_clears_the_output_buffer(tmp_path: Path) -> None:
    speech = synthesize("Wait, stop please.", "tone")
    full_s = loud_seconds(synthesize(LONG, "tone"))
    async with call(tmp_path, LONG, speed=2.0) as (peer, _client_wire):
        await say(peer)
        await peer.until("output_audio_buffer.started")
        await peer.audio_until(lambda a: loud_seconds(a) >= 1.0)
        peer.transport.push_audio(speech)
        events = await peer.until("output_audio_buffer.cleared")
        events += await peer.until("conversation.item.truncated")
    kinds = types(events)
    done = first(events, "response.done")
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    assert kinds.index("input_audio_buffer.speech_started") < kinds.index("output_audio_buffer.cleared")
    assert 1000 <= first(events, "conversation.item.truncated")["audio_end_ms"] < (full_s - 1.0) * 1000


async def test_a_refused_token_is_one_line_with_http_401(tmp_path: Path) -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        with pytest.raises(ConnectionFailed) as caught:
            await WebRTCTransport.connect(server.http_url, "sk-wrong-token-123456")
    message = str(caught.value)
    assert "HTTP 401" in message and "\n" not in message
    assert "sk-wrong-token-123456" not in message


async def test_no_server_is_a_one_line_connection_failure() -> None:
    async with serve(ServerConfig(port=0, voice="tone")) as server:
        url = server.http_url
    with pytest.raises(ConnectionFailed, match="cannot connect to .*realtime/calls") as caught:
        await WebRTCTransport.connect(url, KEY)
    assert "\n" not in str(caught.value)


_HEAD = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
_AUDIO = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\n"
_EVENTS = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\n"
_CARRIED = "a=sendrecv\r\n" + _EVENTS  # audio both ways and the events: what answer_problem asks, so aiortc parses


@pytest.mark.parametrize("answer", [
    "v=0\r\nthis is not sdp\r\nm=audio\r\n" + _CARRIED,  # aiortc's parser asserts
    _HEAD + "m=audio 9\r\n" + _CARRIED,
    _HEAD + "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN\r\n" + _CARRIED,
    _HEAD + _AUDIO + "a=candidate:1 1 udp\r\n" + _CARRIED,
    _HEAD + _AUDIO + "a=rtpmap:111\r\n" + _CARRIED,  # it unpacks
    _HEAD + _AUDIO + _CARRIED,  # it raises ValueError (no ICE credentials)
    _HEAD,  # no media at all: said before aiortc sees it
])
async def test_an_unusable_sdp_answer_is_a_one_line_connection_failure(answer: str) -> None:
    async def offer(url: str, token: str, sdp: str, timeout: float) -> Answer:
        return Answer(answer, "rtc_1")

    with pytest.raises(ConnectionFailed) as caught:
        await WebRTCTransport.connect("http://127.0.0.1:9/v1", KEY, offer=offer, open_timeout=3)
    message = str(caught.value)
    assert "sent an unusable SDP answer (" in message and "\n" not in message and len(message) < 500


@pytest.mark.parametrize("size", ["300", "-1"])
async def test_an_answer_whose_channel_takes_too_small_a_message_is_refused_at_connect(tmp_path: Path, size: str) -> None:
    """The rule the local server holds offers to: a channel under 16 KiB could not carry a session's events."""
    async def offer(url: str, token: str, sdp: str, timeout: float) -> Answer:
        answer = await post_offer(url, token, sdp, timeout=timeout)
        assert "a=max-message-size:" in answer.sdp
        lines = [f"a=max-message-size:{size}" if line.startswith("a=max-message-size:") else line
                 for line in answer.sdp.split("\r\n")]
        return Answer("\r\n".join(lines), answer.call_id)

    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        with pytest.raises(ConnectionFailed) as caught:
            await WebRTCTransport.connect(server.http_url, KEY, offer=offer, open_timeout=10)
    message = str(caught.value)
    assert f"sent an unusable SDP answer (a=max-message-size {size} " in message and "\n" not in message


@pytest.mark.parametrize(("answer", "problem"), [
    (_HEAD + _AUDIO + "a=sendrecv\r\n" + _EVENTS, None),
    (_HEAD + _AUDIO.replace(" 9 ", " 0 ") + "a=bundle-only\r\na=sendrecv\r\n" + _EVENTS, None),  # rides on mid 1
    (_HEAD + _AUDIO + "a=inactive\r\na=sendrecv\r\n" + _EVENTS, None),  # the last direction is the one aiortc takes
    (_HEAD + _AUDIO + "a=recvonly\r\n" + _EVENTS, "a=recvonly for the audio: the server would never send its voice"),
    (_HEAD + _AUDIO + "a=sendonly\r\n" + _EVENTS, "a=sendonly for the audio: the server would never take the microphone"),
    (_HEAD + _AUDIO + "a=sendrecv\r\na=inactive\r\n" + _EVENTS,
     "a=inactive for the audio: no audio would flow either way"),
    (_HEAD + _AUDIO + _EVENTS + "a=sendrecv\r\n",  # the data section's line says nothing of the audio
     "no direction for the audio: aiortc would then neither send nor receive it"),
    (_HEAD + _AUDIO.replace(" 9 ", " 0 ") + "a=sendrecv\r\n" + _EVENTS, "port 0 for the audio: the server rejects it"),
    (_HEAD + _AUDIO + "a=sendrecv\r\n" + _EVENTS.replace(" 9 ", " 0 "),
     "port 0 for the events' data channel: the server rejects it"),
    (_HEAD + _AUDIO + "a=sendrecv\r\n", "no m=application section: it leaves out the events' data channel"),
    (_HEAD, "no m=audio section: it leaves out the audio"),
])
def test_an_answer_that_leaves_the_call_without_its_audio_or_events_is_named(answer: str, problem: str | None) -> None:
    assert answer_problem(answer) == problem


def _audio_answer(direction: str | None = None, port0: str = "") -> Callable[[str], str]:
    """The local server's answer with its audio direction set to ``direction``, or the port of its ``port0``
    section made 0."""
    def change(sdp: str) -> str:
        lines, kind = [], ""
        for line in sdp.split("\r\n"):
            if line.startswith("m="):
                kind = line[2:].split(" ", 1)[0]
                if kind == port0:
                    line = " ".join([line.split(" ")[0], "0", *line.split(" ")[2:]])
            if direction and kind == "audio" and line == "a=sendrecv":
                line = f"a={direction}"
            lines.append(line)
        assert lines != sdp.split("\r\n")
        return "\r\n".join(lines)
    return change


def _answered_then(change: Callable[[str], str]) -> Callable[[str, str, str, float], Awaitable[Answer]]:
    """An offerer that posts the offer as the transport does and hands back the server's answer through ``change``."""
    async def offer(url: str, token: str, sdp: str, timeout: float) -> Answer:
        answer = await post_offer(url, token, sdp, timeout=timeout)
        return Answer(change(answer.sdp), answer.call_id)
    return offer


@pytest.mark.parametrize(("change", "said"), [
    (_audio_answer("inactive"), "a=inactive for the audio: no audio would flow"),
    (_audio_answer("recvonly"), "a=recvonly for the audio: the server would never send its voice"),
    (_audio_answer("sendonly"), "a=sendonly for the audio: the server would never take the microphone"),
    (_audio_answer(port0="audio"), "port 0 for the audio: the server rejects it"),
    (_audio_answer(port0="application"), "port 0 for the events' data channel: the server rejects it"),
])
async def test_an_answer_that_would_connect_a_call_without_audio_or_events_is_refused_at_connect(
        tmp_path: Path, change: Callable[[str], str], said: str) -> None:
    """Before, each of these connected: the data channel opened, and the call carried no voice one way or both (or
    no events), without a word."""
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        with pytest.raises(ConnectionFailed) as caught:
            await WebRTCTransport.connect(server.http_url, KEY, offer=_answered_then(change), open_timeout=10)
    message = str(caught.value)
    assert f"sent an unusable SDP answer ({said}" in message and "\n" not in message and KEY not in message


def _wrong_fingerprint(sdp: str) -> str:
    head, _, rest = sdp.partition("a=fingerprint:sha-256 ")
    assert rest
    return head + "a=fingerprint:sha-256 " + ("00" if not rest.startswith("00") else "11") + rest[2:]


@pytest.mark.parametrize(("change", "said"), [
    (_wrong_fingerprint, "the DTLS handshake failed"),
    (lambda sdp: "".join(line for line in sdp.splitlines(keepends=True) if not line.startswith("a=candidate:")),
     "no ICE candidate pair connected"),
])
async def test_a_call_whose_connection_fails_is_a_connect_failure_with_its_reason_at_once(
        tmp_path: Path, change: Callable[[str], str], said: str) -> None:
    """Before, a DTLS failure was reported only at the open's deadline, as "did not open within"; and an answer
    without candidates made connect() return a transport already dead."""
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        with pytest.raises(ConnectionFailed) as caught:
            await WebRTCTransport.connect(server.http_url, KEY, offer=_answered_then(change), open_timeout=20)
    message = str(caught.value)
    assert message.startswith("the WebRTC call to ") and f"failed: {said}" in message and "\n" not in message


async def _offer_refused(token: str, status: int, body: Callable[[str], bytes]) -> str:
    """Post an offer with ``token`` to a loopback endpoint that answers ``status`` with ``body(the token it was
    sent)``: the one-line failure the caller gets."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        sent = next(line.split(b"Bearer ")[1] for line in lines if line.startswith(b"Authorization")).decode()
        text = body(sent)
        writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (status, len(text)) + text)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConnectionFailed) as caught:
            await post_offer(calls_url(f"http://127.0.0.1:{port}/v1"), token, "v=0\r\n")
    finally:
        server.close()
        await server.wait_closed()
    return str(caught.value)


async def test_a_huge_error_message_from_the_calls_endpoint_is_clipped() -> None:
    message = await _offer_refused(KEY, 500, lambda _token: json.dumps({"error": {"message": "x" * 200_000}}).encode())
    assert "HTTP 500: xxx" in message and len(message) < MESSAGE_CHARS + 200


async def test_a_key_the_calls_endpoint_echoes_where_its_message_is_cut_is_never_shown_in_part() -> None:
    """The message was cut to 300 characters before it was redacted: a key echoed across the cut lost its end,
    no redaction recognised what was left, and 24 of its 26 characters reached the farm's JUnit file."""
    key = "canary7Qx2-Lm9Zt4Wv8Rb3Kc6"
    message = await _offer_refused(key, 401, lambda token: json.dumps({"error": {"message": "x" * 285 + " " + token}}).encode())
    assert "HTTP 401" in message and not any(key[i:i + 6] in message for i in range(len(key) - 5)), message


async def _answered(location: str) -> Answer:
    """Post an offer to a loopback endpoint that answers 201 with an SDP body and ``location``: the answer taken."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        body = b"v=0\r\n"
        writer.write(b"HTTP/1.1 201 Created\r\nLocation: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % (location.encode("latin-1"), len(body)) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await post_offer(calls_url(f"http://127.0.0.1:{port}/v1"), KEY, "v=0\r\n")
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(("location", "call_id"), [
    ("/v1/realtime/calls/rtc_1", "rtc_1"),
    ("/v1/realtime/calls/rtc_1/", "rtc_1"),
    ("/v1/realtime/calls/rtc_1?after=x/y#part", "rtc_1"),  # before: "rtc_1?after=x/y#part"
    ("https://elsewhere.example/v1/realtime/calls/rtc_2", "rtc_2"),  # only the id is taken; nothing is sent there
])
async def test_the_call_id_is_the_last_segment_of_the_locations_path(location: str, call_id: str) -> None:
    assert (await _answered(location)).call_id == call_id


@pytest.mark.parametrize("location", ["", "/", "/v1/realtime/calls", "/v1/realtime/calls/"])
async def test_a_location_naming_no_call_is_a_one_line_connection_failure(location: str) -> None:
    """``/v1/realtime/calls/`` gave the call the id "calls"."""
    with pytest.raises(ConnectionFailed, match="HTTP 201 but no SDP answer and call id$"):
        await _answered(location)


_CANARY = "canaryQQ7x2Lm9Zt4Wv8Rb3Kc6"


@pytest.mark.parametrize(("call_id", "said"), [
    (_CANARY, "it holds a key"),  # a server echoing the key: the id is shown, logged, and handed to a backend
    (f"rtc_{_CANARY}", "it holds a key"),
    ("sk-proj-Zt4Wv8Rb3Kc6abcd", "it holds a key"),
    ("rtc_\x1b[2J\x1b[31mred", "it holds a space, a control character or one that is not ASCII"),
    ("rtc 1", "it holds a space, a control character or one that is not ASCII"),
    ("rtc_\u00e9", "it holds a space, a control character or one that is not ASCII"),
    ("r" * 20_000, "it is 20000 characters long; at most 128 are taken"),
    ("", "it is empty"),
], ids=["key", "key-inside", "key-by-shape", "escape", "space", "not-ascii", "long", "empty"])
async def test_an_unusable_call_id_is_a_one_line_connection_failure_that_does_not_show_it(call_id: str,
                                                                                            said: str) -> None:
    """Before, any id was taken: a key a server echoed in its Location became the call id, shown in the transport's
    repr and the session's ``call_id``; an escape sequence reached the terminal, 20,000 characters every log line."""
    async def offer(url: str, token: str, sdp: str, timeout: float) -> Answer:
        return Answer("v=0\r\n", call_id)

    with pytest.raises(ConnectionFailed) as caught:
        await WebRTCTransport.connect("http://127.0.0.1:9/v1", _CANARY, offer=offer, open_timeout=5)
    message = str(caught.value)
    assert message.endswith(f"named the call with an unusable id ({said})") and "\n" not in message
    assert _CANARY not in message and "\x1b" not in message and len(message) < 300


@pytest.mark.parametrize(
    "offer",
    ["this is not SDP", "v=0\r\n", "v=0\r\nm=audio\r\n", "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n"],
)
async def test_a_bad_offer_is_refused_with_http_400(tmp_path: Path, offer: str) -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        with pytest.raises(ConnectionFailed, match="HTTP 400: Invalid SDP offer"):
            await post_offer(calls_url(server.http_url), KEY, offer)


async def test_the_official_sdk_gets_an_sdp_answer(tmp_path: Path) -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        pc.createDataChannel("oai-events")
        pc.addTransceiver("audio")
        await pc.setLocalDescription(await pc.createOffer())
        async with AsyncOpenAI(api_key=KEY, base_url=server.http_url) as client:
            answer = await client.realtime.calls.create(sdp=pc.localDescription.sdp)
        await pc.close()
    assert answer.response.status_code == 201
    assert answer.response.headers["content-type"] == "application/sdp"
    assert answer.response.headers["location"].startswith("/v1/realtime/calls/rtc_")
    assert "opus/48000/2" in answer.text and "m=application" in answer.text


async def test_closing_the_server_ends_the_call(tmp_path: Path) -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        transport = await WebRTCTransport.connect(server.url, KEY)  # a ws:// base is mapped to http://
        assert json.loads(await transport.recv())["type"] == "session.created"
        await server.close()
        with pytest.raises(ConnectionClosed) as caught:
            async with asyncio.timeout(10):
                while True:
                    await transport.recv()
        assert caught.value.code == 1006
        await transport.close()


@pytest.mark.slow
async def test_the_session_length_cap_sends_session_expired_then_hangs_up(tmp_path: Path) -> None:
    async with call(tmp_path, max_session_s=1.0) as (peer, _client_wire):
        events = await peer.until("error")
        assert events[-1]["error"]["code"] == "session_expired"
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    await peer.transport.recv()


# ---------------------------------------------------------------- the server's output buffer


def tone(n: int, value: int = 1000) -> np.ndarray:
    return np.full(n, value, dtype=np.int16)


def test_output_buffer_announces_start_and_stop_per_response() -> None:
    buf = OutputAudioBuffer()
    buf.push("r1", "i1", tone(600))
    samples, notices = buf.read(480)
    assert notices == [Started("r1")] and samples.min() == 1000
    samples, notices = buf.read(480)
    assert notices == [] and samples[:120].min() == 1000 and samples[120:].max() == 0  # underrun: still playing
    assert buf.playing == "r1"
    buf.finish("r1")
    _, notices = buf.read(480)
    assert notices == [Stopped("r1")] and not buf.audible


def test_output_buffer_hands_over_between_responses() -> None:
    buf = OutputAudioBuffer()
    buf.push("r1", "i1", tone(240))
    buf.finish("r1")
    buf.push("r2", "i2", tone(480, 2000))
    samples, notices = buf.read(480)
    assert notices == [Started("r1"), Stopped("r1"), Started("r2")]
    assert samples[239] == 1000 and samples[240] == 2000
    assert buf.played_samples("i1") == 240 and buf.played_samples("i2") == 240


def test_output_buffer_clear_reports_what_was_cut() -> None:
    buf = OutputAudioBuffer()
    buf.push("r1", "i1", tone(1000))
    buf.push("r1", "i2", tone(500))
    buf.read(480)
    cleared = buf.clear()
    assert cleared == Cleared("r1", (("i1", 480), ("i2", 0)), dropped_samples=1020)
    samples, notices = buf.read(480)
    assert notices == [] and samples.max() == 0 and not buf.audible
    assert buf.clear() == Cleared("r1", (), 0)  # nothing left: names the last response


def test_output_buffer_clear_before_any_audio_names_no_response() -> None:
    assert OutputAudioBuffer().clear() == Cleared(None, (), 0)


# ---------------------------------------------------------------- client helpers


def test_sample_queue_hands_out_whole_frames() -> None:
    queue = SampleQueue()
    queue.push(np.arange(1, 301, dtype=np.int16))
    queue.push(np.arange(301, 501, dtype=np.int16))
    first = queue.take(480)
    assert list(first[:3]) == [1, 2, 3] and first[-1] == 480 and queue.queued == 20
    second = queue.take(480)
    assert list(second[:20]) == list(range(481, 501)) and second[20:].max() == 0 and queue.queued == 0
    queue.take(480)
    assert queue.padded == 460 + 480  # the silence handed out for want of samples: the peer counts it as said
    with pytest.raises(TypeError):
        queue.push(np.zeros(4, dtype=np.float32))


async def test_a_servers_close_of_a_peer_that_hung_up_survives_being_cancelled() -> None:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    own = asyncio.ensure_future(pc.close())  # what aiortc starts by itself once the caller's DTLS has closed
    await asyncio.sleep(0)
    ours = asyncio.create_task(close_peer(pc))  # the call's close, waiting on aiortc's
    await asyncio.sleep(0)
    ours.cancel()  # the server shutting down
    await own  # an unshielded close would have cancelled this close's future: InvalidStateError here
    assert pc.connectionState == "closed"
    with pytest.raises(asyncio.CancelledError):
        await ours


def _decoded(decoder: RemoteAudioDecoder, clock: VirtualClock, frames: list[tuple[float, av.AudioFrame]]) -> list[Any]:
    """Each frame decoded at its instant on ``clock``."""
    out = []
    for at, frame in frames:
        clock.advance_to(at)
        out.append(decoder.decode(frame))
    return out


def test_a_decoded_track_follows_the_senders_rtp_clock_across_lost_packets() -> None:
    clock = VirtualClock()
    decoder = RemoteAudioDecoder(clock)
    frames = [(0.02 * k, audio_frame(np.full(480, k + 1, np.int16), 480 * k)) for k in range(6)]
    del frames[2:4]  # two packets lost (or dropped by the jitter buffer)
    out = np.concatenate(_decoded(decoder, clock, frames))
    assert out.size == 6 * 480  # a count of samples is the position on the sender's track
    assert list(out[::480]) == [1, 2, 0, 0, 5, 6]  # the lost frames' time is silence; what follows is in its place


def test_a_decoded_track_takes_a_long_jump_of_its_clock_as_a_new_start() -> None:
    clock = VirtualClock()
    decoder = RemoteAudioDecoder(clock)
    frames = [(t, audio_frame(np.ones(480, np.int16), pts)) for t, pts in ((0, 0), (0.02, 480), (7200, 480 + 3600 * RATE))]
    assert [b.size for b in _decoded(decoder, clock, frames)] == [480, 480, 480]  # an hour of silence is not made up


def test_a_jump_of_the_senders_rtp_clock_fills_no_more_silence_than_the_time_that_passed() -> None:
    """A sender whose RTP clock jumped 4.9 s ahead at every frame (under the 5 s taken as a new start) had 246 s of
    silence made a second: the listener's timeline ran minutes ahead of the call."""
    clock = VirtualClock()
    decoder = RemoteAudioDecoder(clock)
    frames = [(0.02 * k, audio_frame(np.ones(480, np.int16), k * int(4.9 * RATE))) for k in range(50)]
    out = _decoded(decoder, clock, frames)
    assert sum(b.size for b in out) <= round((49 * 0.02 + LEAD_S) * RATE)  # the time that passed, and the lead
    # (it was 240 s of silence)


def test_packets_lost_inside_a_burst_keep_what_follows_in_its_place() -> None:
    """A jitter buffer lets go of what it held at once: a loss among those packets came with no time passing, and
    is still the sender's time, within the lead the track may have on the time since it began."""
    clock = VirtualClock()
    decoder = RemoteAudioDecoder(clock)
    first = (0.0, audio_frame(np.zeros(480, np.int16), 0))
    held = [(0.3, audio_frame(np.full(480, k, np.int16), 480 * k)) for k in range(1, 13)]  # all at once, at 0.3 s
    del held[5:7]
    out = np.concatenate(_decoded(decoder, clock, [first, *held]))
    assert list(out[480::480]) == [1, 2, 3, 4, 5, 0, 0, 8, 9, 10, 11, 12]


def test_a_pause_without_packets_is_no_credit_for_a_clock_that_jumps_after_it() -> None:
    """A sender that sends nothing for a minute, then jumps its clock 4.9 s at every packet, makes no more than the
    time that passes after the pause, and the lead (before, the pause's minute was credit for silence)."""
    clock = VirtualClock()
    decoder = RemoteAudioDecoder(clock)
    before = [(0.02 * k, audio_frame(np.ones(480, np.int16), 480 * k)) for k in range(5)]
    after = [(60.0 + 0.02 * k, audio_frame(np.ones(480, np.int16), 480 * 5 + k * int(4.9 * RATE))) for k in range(50)]
    out = _decoded(decoder, clock, [*before, *after])
    made_after = sum(b.size for b in out[5:])
    # the pause's end is a new start at most (a jump past MAX_GAP_S fills nothing), then time and two leads at most
    assert made_after <= round((49 * 0.02 + 2 * LEAD_S) * RATE) + 50 * 480, made_after / RATE


async def test_a_queued_track_sends_what_was_queued_and_no_filler() -> None:
    clock = VirtualClock()
    queue = SampleQueue()
    track = QueuedAudioTrack(queue, clock)
    first = asyncio.ensure_future(track.recv())
    clock.advance(0.2)  # nothing queued yet: a paced track would have sent ten frames of silence by now
    await asyncio.sleep(0)
    assert not first.done()
    queue.push(np.arange(1, 2401, dtype=np.int16))  # one 100 ms frame of a Live engine's track
    track.wake()
    frames = [await first]
    for _ in range(4):
        step = asyncio.ensure_future(track.recv())
        while not step.done():
            clock.advance(0.005)
            await asyncio.sleep(0)
        frames.append(step.result())
    assert [f.pts for f in frames] == [0, 480, 960, 1440, 1920]  # the RTP clock counts the queued samples
    assert [int(f.to_ndarray()[0][0]) for f in frames] == [1, 481, 961, 1441, 1921]
    assert clock.now() == pytest.approx(0.2 + 0.08, abs=0.006)  # paced at 20 ms a frame from the first
    waiting = asyncio.ensure_future(track.recv())
    await asyncio.sleep(0)
    track.stop()  # a track waiting for its next frame ends when stopped
    with pytest.raises(MediaStreamError):
        await waiting


async def test_a_microphone_track_sends_nothing_before_its_first_block_then_a_frame_behind_the_blocks() -> None:
    clock = VirtualClock()
    queue = SampleQueue()
    track = MicrophoneTrack(queue, clock)
    first = asyncio.ensure_future(track.recv())
    clock.advance(0.3)  # the call connecting: silence sent now would count on the server's input timeline
    await asyncio.sleep(0)
    assert not first.done()
    queue.push(np.arange(1, 961, dtype=np.int16))  # a 40 ms block, whole 10 ms ago (the session went live late)
    track.pushed(960, age_s=0.01)
    frames: list[av.AudioFrame] = []
    times: list[float] = []
    pushed: list[float] = []

    async def next_frame(step: asyncio.Future[av.AudioFrame] | None = None) -> None:
        step = step or asyncio.ensure_future(track.recv())
        await asyncio.sleep(0)
        while not step.done():
            clock.advance(0.005)
            await asyncio.sleep(0)
            if clock.now() >= 0.33 - 1e-9 and not pushed:  # the next block, pushed as it is whole
                pushed.append(clock.now())
                queue.push(np.arange(961, 1921, dtype=np.int16))
                track.pushed(960)
        frames.append(step.result())
        times.append(clock.now())

    await next_frame(first)
    for _ in range(3):
        await next_frame()
    assert [f.pts for f in frames] == [0, 480, 960, 1440]
    assert [int(f.to_ndarray()[0][0]) for f in frames] == [1, 481, 961, 1441]  # no silence anywhere
    # from one frame after the first block was whole (0.29 + 0.02): each block is queued before its frames
    assert times == pytest.approx([0.31, 0.33, 0.35, 0.37], abs=0.006)


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://127.0.0.1:8765/v1", "http://127.0.0.1:8765/v1/realtime/calls?model=m"),
        ("ws://127.0.0.1:8765/v1/", "http://127.0.0.1:8765/v1/realtime/calls?model=m"),
        ("wss://api.openai.com/v1/realtime", "https://api.openai.com/v1/realtime/calls?model=m"),
        ("https://api.openai.com/v1/realtime/calls", "https://api.openai.com/v1/realtime/calls?model=m"),
    ],
)
def test_calls_url(base: str, url: str) -> None:
    assert calls_url(base, model="m") == url


def test_calls_url_rejects_other_schemes_and_spots_loopback() -> None:
    with pytest.raises(ConfigurationError):
        calls_url("ftp://example.com/v1")
    assert is_loopback_url("http://127.0.0.1:1/v1") and is_loopback_url("http://[::1]:1/v1")
    assert is_loopback_url("http://localhost/v1") and not is_loopback_url("https://api.openai.com/v1")


# ---------------------------------------------------------------- text that is not UTF-8


@asynccontextmanager
async def bare_server(token: str = KEY, **options: Any) -> AsyncIterator[tuple[WebRTCTransport, Any]]:
    """voxline's transport (connected with ``options``) called by a bare aiortc peer standing in for the service:
    (the transport, the peer's end of the events channel), to send what no server of ours would."""
    server = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    opened = asyncio.Event()
    channels: list[Any] = []

    def on_channel(channel: Any) -> None:
        channels.append(channel)
        opened.set()

    server.on("datachannel", on_channel)
    server.addTransceiver("audio", direction="sendrecv")  # as the service answers: a peer with no track says recvonly

    async def answer(url: str, token: str, sdp: str, timeout: float) -> Answer:
        await server.setRemoteDescription(RTCSessionDescription(sdp, "offer"))
        await server.setLocalDescription(await server.createAnswer())
        return Answer(server.localDescription.sdp, "rtc_raw")

    transport = await WebRTCTransport.connect("http://127.0.0.1:9/v1", token, offer=answer, **options)
    try:
        async with asyncio.timeout(10):
            await opened.wait()
        yield transport, channels[0]
    finally:
        await transport.close()
        await server.close()


async def test_a_servers_text_message_that_is_not_utf8_is_one_malformed_event_and_the_call_goes_on() -> None:
    """aiortc decodes a text message strictly inside its SCTP receive path: one stray byte raised there and closed
    the whole connection (1006), a lost session over one frame. A browser reads it with U+FFFD; so does voxline."""
    async with bare_server() as (transport, channel):
        async with asyncio.timeout(10):
            await send_raw_text(channel, b'{"type":"error","error":{"message":"caf\xe9 \xff"}}')
            channel.send('{"type":"session.updated","event_id":"after"}')
            assert await transport.recv() == '{"type":"error","error":{"message":"caf\ufffd \ufffd"}}'
            assert json.loads(await transport.recv())["event_id"] == "after"
        assert transport.close_code is None


async def test_a_key_given_with_whitespace_is_scrubbed_from_what_the_server_echoes_as_it_was_sent() -> None:
    """The key goes out trimmed (HTTP drops the whitespace), so a server echoes it trimmed: the scrub looked for it
    with its whitespace, never found it, and the echo reached the event log, the summary and the report."""
    key = "canaryQQ7x2Lm9Zt4Wv8Rb3Kc6"
    async with bare_server(key + " \r") as (transport, channel):
        channel.send(json.dumps({"type": "error", "error": {"message": f"Incorrect key provided: {key}."}}))
        async with asyncio.timeout(10):
            text = await transport.recv()
        assert key not in text and "Incorrect key provided" in text


async def test_a_clients_text_message_that_is_not_utf8_gets_a_typed_error_and_the_call_goes_on(tmp_path: Path) -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY, scenario=scenario(tmp_path, SHORT))) as server:
        transport = await WebRTCTransport.connect(server.http_url, KEY)
        peer = Peer(WireRecorder())
        peer.transport = transport
        try:
            await peer.until("session.created")
            await send_raw_text(transport._channel, b'\xff\xfe{"type":"session.update"')
            refused = first(await peer.until("error"), "error")
            assert refused["error"]["type"] == "invalid_request_error", refused
            await peer.send({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}})
            await peer.until("session.updated")
            assert transport.close_code is None
        finally:
            await transport.close()


async def test_a_message_that_comes_after_the_transport_ended_is_not_read() -> None:
    """recv() raised ConnectionClosed, then returned the messages that came after it: an audio job's failure (1011)
    ends the transport while the peer's channel may still speak."""
    async def failing() -> AsyncIterator[np.ndarray]:
        raise OSError("microphone gone")
        yield np.zeros(0, np.int16)

    async with bare_server(audio_source=failing()) as (transport, channel):
        async with asyncio.timeout(10):
            with pytest.raises(ConnectionClosed, match="1011"):
                await transport.recv()
            arrived = asyncio.Event()
            transport._channel.on("message", lambda _message: arrived.set())  # heard after the transport's own handler
            channel.send('{"type":"session.updated","event_id":"late"}')
            await arrived.wait()
            for _ in range(2):
                with pytest.raises(ConnectionClosed, match="1011"):
                    await transport.recv()
