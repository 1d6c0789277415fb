"""Events sized for the connection: a WebRTC data channel carries far smaller messages than a WebSocket.

The SDP answer says how large a message the peer takes (``a=max-message-size``, 64 KiB when it
does not say). A text or an update too large for it is the app's one-line error before anything
is queued; a tool's output too large is sent as an error output the model can read; an item the
conversation cannot carry onto a new call is counted, and the rest is rebuilt.
"""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.audio.playout import PlayoutBuffer
from typing import Any

from voxline.realtime.errors import ConfigurationError, LocalProtocolError
from voxline.realtime.live import events as lv
from voxline.realtime.frames import b64_pieces, text_pieces, user_audio_creates
from voxline.realtime.live.protocol import LiveProtocol
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.transports.rtc_sdp import DEFAULT_MAX_MESSAGE, peer_max_message
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.session.events import ConnectionLost, ConnectionRestored, ResponseFinished, SessionError
from voxline.session.machine.machine import SessionMachine
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.session_events import until

LIMIT = 65_536


_HEAD = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
_DATA = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=sctp-port:5000\r\n"


@pytest.mark.parametrize(("lines", "limit"), [
    ("a=max-message-size:262144\r\n", 262_144),
    ("", DEFAULT_MAX_MESSAGE),  # says nothing: 64 KiB
    ("a=max-message-size:0\r\n", None),  # any size
    ("a=max-message-size:262144\r\na=max-message-size:20000\r\n", 20_000),  # the last, as aiortc enforces it
    ("a=max-message-size:+20000\r\n", 20_000),
])
def test_the_answer_says_how_large_a_message_the_peer_takes(lines: str, limit: int | None) -> None:
    assert peer_max_message(_HEAD + _DATA + lines) == limit


@pytest.mark.parametrize("room", [0, 3, 4, 7, 8, 100, 4096, 65_536])
@pytest.mark.parametrize("size", [0, 1, 2, 6, 1000, 100_001])
def test_audio_splits_into_whole_samples_whose_base64_fits(room: int, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    pieces = b64_pieces(data, room)
    if room < 4:  # not even one sample's base64 fits
        assert pieces == []
        return
    assert b"".join(pieces) == data and all(len(p) % 2 == 0 or p is pieces[-1] for p in pieces)
    assert all(len(base64.b64encode(p)) <= room for p in pieces)


@pytest.mark.parametrize("chained", [False, True])
def test_user_audio_items_in_a_row_carry_the_audio_in_order_each_naming_the_one_before(chained: bool) -> None:
    """One builder makes a resent turn's items and a rebuilt item's pieces: the pieces are the audio, each item
    is a user message with its own id, and chained ones follow each other from the item they come after."""
    data = (np.arange(5_000) % 700).astype("<i2").tobytes()
    ids = iter(f"item_{k}" for k in range(100))
    out = user_audio_creates(data, 1_000, ids, item={"type": "message", "role": "user", "status": "completed"},
                             chained=chained, after="item_before")
    assert len(out) > 1 and b"".join(piece for _payload, piece in out) == data
    payloads = [payload for payload, _piece in out]
    assert [p["item"]["id"] for p in payloads] == [f"item_{k}" for k in range(len(out))]
    for payload, piece in out:
        item = payload["item"]
        assert (item["type"], item["role"], item["status"]) == ("message", "user", "completed")
        assert base64.b64decode(item["content"][0]["audio"]) == piece and len(item["content"][0]["audio"]) <= 1_000
    if chained:
        assert [p["previous_item_id"] for p in payloads] == ["item_before"] + [f"item_{k}" for k in range(len(out) - 1)]
    else:
        assert all("previous_item_id" not in p for p in payloads)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400), st.integers(-64, 64))
def test_text_splits_into_pieces_whose_json_fits(text: str, room: int) -> None:
    pieces = text_pieces(text, room)
    if pieces:
        assert "".join(pieces) == text
        assert all(len(json.dumps(p, ensure_ascii=False).encode()) - 2 <= room for p in pieces)
    else:  # nothing to split, or a character whose JSON takes more than the room
        assert not text or any(len(json.dumps(c, ensure_ascii=False).encode()) - 2 > room for c in text)


def test_long_text_is_split_after_whole_words_and_never_before_a_combining_mark() -> None:
    """A text too long for one message of a call is split into several: each piece reads as whole words (before:
    cut at the byte limit, inside a word, and a combining accent could begin the next message)."""
    words = "cafe\u0301 na\u0308ive \U0001f469\u200d\U0001f4bb resume\u0301 "  # decomposed accents, a ZWJ emoji
    text = words * 200
    pieces = text_pieces(text, 500)
    assert "".join(pieces) == text and len(pieces) > 10
    assert all(piece.endswith(" ") for piece in pieces[:-1])
    spaceless = "e\u0301" * 400  # no space at all: still never a mark split from its letter
    pieces = text_pieces(spaceless, 301)
    assert "".join(pieces) == spaceless and all(piece.startswith("e") for piece in pieces)
    # clusters written out by hand (an oracle apart from the code): a skin tone, a flag, a subdivision flag, a keycap,
    # a letter with two marks, a family joined by ZWJs; none is ever torn apart, whatever the room
    for unit in ("\U0001f44d\U0001f3fd", "\U0001f1eb\U0001f1f7", "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e"
                 "\U000e0067\U000e007f", "1\ufe0f\u20e3", "a\u0301\u0323",
                 "\U0001f468\u200d\U0001f469\u200d\U0001f467"):
        for room in range(len(unit.encode()), 4 * len(unit.encode())):
            pieces = text_pieces(unit * 30, room)
            assert "".join(pieces) == unit * 30 and all(len(piece) % len(unit) == 0 for piece in pieces), room


def test_an_event_larger_than_the_connection_carries_is_refused_before_it_is_queued() -> None:
    protocol = RealtimeProtocol()
    protocol.max_event_bytes = LIMIT
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "é" * 40_000}]}
    with pytest.raises(LocalProtocolError, match=r"^conversation.item.create is 80\d{3} bytes as JSON, and this "
                                                 r"connection carries at most 65536 bytes an event$"):
        protocol.send({"type": "conversation.item.create", "item": item})
    assert protocol.data_to_send() == []
    protocol.send({"type": "conversation.item.create", "item": {**item, "content": [
        {"type": "input_text", "text": "é" * 30_000}]}})  # 60 000 bytes: it fits
    assert len(protocol.data_to_send()) == 1
    live = LiveProtocol(started=True)
    live.max_event_bytes = LIMIT
    with pytest.raises(LocalProtocolError, match=r"^session.thinking.append is \d+ bytes as JSON"):
        live.send(lv.LiveThinkingAppend(content="x" * 70_000))
    assert live.data_to_send() == []


def _machine(limit: int) -> tuple[SessionMachine, RealtimeProtocol]:
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    protocol.max_event_bytes = limit
    machine.attach(protocol)
    return machine, protocol


def _receive(machine: SessionMachine, protocol: RealtimeProtocol, *events: dict[str, object]) -> None:
    for event in events:
        protocol.receive(json.dumps({"event_id": "e", **event}))
        for output in protocol.events():
            machine.receive(output, 0.0)


def _tool_called(machine: SessionMachine, protocol: RealtimeProtocol, arguments: str = "{}") -> None:
    """The server's response that calls ``report`` (call_1, item_f) with ``arguments``, done."""
    call = {"id": "item_f", "object": "realtime.item", "type": "function_call", "status": "completed",
            "call_id": "call_1", "name": "report", "arguments": arguments}
    _receive(machine, protocol,
             {"type": "response.created", "response": {"id": "resp_1", "object": "realtime.response",
                                                      "status": "in_progress", "output": []}},
             {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0,
              "item": {**call, "status": "in_progress", "arguments": ""}},
             {"type": "conversation.item.added", "previous_item_id": None,
              "item": {**call, "status": "in_progress", "arguments": ""}},
             {"type": "response.function_call_arguments.done", "response_id": "resp_1", "item_id": "item_f",
              "output_index": 0, "call_id": "call_1", "name": "report", "arguments": arguments},
             {"type": "conversation.item.done", "previous_item_id": None, "item": call},
             {"type": "response.done", "response": {"id": "resp_1", "object": "realtime.response",
                                                    "status": "completed", "output": [call]}})
    protocol.data_to_send()


def _echoed(machine: SessionMachine, protocol: RealtimeProtocol, previous: str | None) -> None:
    """The client's items sent so far, as the server echoes them into its conversation."""
    for text in protocol.data_to_send():
        event = json.loads(text)
        if event["type"] == "conversation.item.create":
            _receive(machine, protocol, {"type": "conversation.item.added", "previous_item_id": previous,
                                         "item": {**event["item"], "object": "realtime.item", "status": "completed"}})


def _drop(machine: SessionMachine, protocol: RealtimeProtocol) -> None:
    protocol.connection_lost()
    machine.connection_lost(1.0, 1006, "gone")


def _reconnect(machine: SessionMachine, limit: int) -> tuple[RealtimeProtocol, list[dict[str, Any]], ConnectionRestored]:
    """The next connection is a call of ``limit``-byte messages: its protocol, what it was sent (every frame within
    the limit), what the restore said."""
    fresh = RealtimeProtocol()
    fresh.max_event_bytes = limit
    machine.attach(fresh)
    restored = machine.restore(1.5)
    frames = fresh.data_to_send()
    assert all(len(text.encode()) <= limit for text in frames)
    return fresh, [json.loads(text) for text in frames], restored


def _on_a_call(machine: SessionMachine) -> tuple[RealtimeProtocol, list[dict[str, Any]], ConnectionRestored]:
    """The next connection is a call of 64 KiB messages."""
    return _reconnect(machine, LIMIT)


def test_a_text_too_large_for_the_connection_is_the_apps_one_line_error() -> None:
    machine, protocol = _machine(LIMIT)
    with pytest.raises(ConfigurationError, match=r"^send_text: the text is 70002 bytes as JSON, and one event on "
                                                 r"this connection carries at most 65536 bytes$"):
        machine.send_text("x" * 70_000)
    with pytest.raises(ConfigurationError, match=r"^update: instructions is \d+ bytes as JSON, and one event on this"):
        machine.update(instructions="y" * 70_000)
    assert machine.settings.instructions is None
    machine.send_text("x" * 60_000)  # fits
    assert [json.loads(t)["type"] for t in protocol.data_to_send()] == ["conversation.item.create", "response.create"]


def test_a_tool_output_too_large_for_the_connection_goes_as_an_error_output() -> None:
    machine, protocol = _machine(LIMIT)
    _tool_called(machine, protocol)
    assert machine.calls.begin("call_1")
    machine.calls.on_result("call_1", "z" * 100_000)
    machine.drain_tools()  # before, the data channel refused the frame and the output was lost
    out = [json.loads(t) for t in protocol.data_to_send()]
    assert [e["type"] for e in out] == ["conversation.item.create", "response.create"]
    output = out[0]["item"]["output"]
    assert "too large to send: 100000 bytes" in output and "at most 65536 bytes" in output


def test_a_text_too_large_for_the_new_connection_goes_as_several_messages_in_order() -> None:
    """A typed message fine on a WebSocket is larger than a call's data channel carries: on the new call it goes
    as several user messages in a row, the whole text in order, and the next item after the last of them.
    Before, it was left out and its text lost."""
    machine, protocol = _machine(20_000_000)
    text = "".join(f'line {k}: "é" \\ ✓\n' for k in range(6_000))  # escapes and multi-byte characters
    machine.send_text(text)
    machine.send_text("short")
    _echoed(machine, protocol, None)
    _drop(machine, protocol)
    _fresh, out, restored = _on_a_call(machine)
    assert restored.skipped_items == 0 and restored.replayed_items == 2
    created = [e for e in out if e["type"] == "conversation.item.create"]
    assert len(created) >= 3 and all(e["item"]["role"] == "user" for e in created)
    assert "".join(e["item"]["content"][0]["text"] for e in created[:-1]) == text
    assert created[-1]["item"]["content"][0]["text"] == "short"
    assert [e["previous_item_id"] for e in created] == ["root", *(e["item"]["id"] for e in created[:-1])]
    assert len({e["item"]["id"] for e in created}) == len(created)


def _texts(events: list[dict[str, Any]]) -> str:
    return "".join(e["item"]["content"][0]["text"] for e in events
                   if e["type"] == "conversation.item.create" and e["item"]["type"] == "message")


def test_a_channel_too_small_for_even_a_pieces_envelope_leaves_the_text_out_and_rebuilds_the_rest() -> None:
    """Before, a limit under the envelope of one piece made the split divide by zero and the reconnect fail."""
    machine, protocol = _machine(20_000_000)
    machine.send_text("x" * 2_000)
    _echoed(machine, protocol, None)
    _drop(machine, protocol)
    _fresh, out, restored = _reconnect(machine, 380)
    assert restored.skipped_items == 1 and _texts(out) == ""


def test_split_pieces_are_the_conversation_after_the_rebuild_a_second_drop_sends_each_once() -> None:
    """The mirror takes the pieces as the new conversation's items: a drop before their echoes came, or after,
    rebuilds the whole text once, in pieces that fit as they are (not split again). Before, the first piece's
    echo replaced the message's text and a drop then lost the rest; or each piece grew by its new id and was
    split again on every reconnect."""
    text = "".join(f"sentence {k}. " for k in range(400))
    for echo_all in (False, True):
        machine, protocol = _machine(20_000_000)
        machine.send_text(text)
        _echoed(machine, protocol, None)
        _drop(machine, protocol)
        fresh, out, _restored = _reconnect(machine, 512)
        first = [e for e in out if e["type"] == "conversation.item.create"]
        assert _texts(out) == text and len(first) > 2
        echoes = first if echo_all else first[:1]  # the echo of the first piece only, then the drop
        for event in echoes:
            _receive(machine, fresh, {"type": "conversation.item.added", "previous_item_id": event["previous_item_id"],
                                      "item": {**event["item"], "object": "realtime.item", "status": "completed"}})
        _drop(machine, fresh)
        _again, out, restored = _reconnect(machine, 512)
        again = [e for e in out if e["type"] == "conversation.item.create"]
        assert _texts(out) == text and restored.skipped_items == 0
        assert [e["item"]["content"][0]["text"] for e in again] == [e["item"]["content"][0]["text"] for e in first]


def test_a_cut_reply_split_on_a_new_call_is_not_sent_twice_after_another_drop() -> None:
    """A reply cut where it was heard keeps its heard text; sent as several messages, it becomes those messages,
    so the next rebuild sends that text once. Before, the cut record kept all of it and the pieces were sent too."""
    machine, protocol = _machine(20_000_000)
    item = {"id": "item_a", "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    audio = base64.b64encode(np.full(24_000, 1000, "<i2").tobytes()).decode()
    _receive(machine, protocol,
             {"type": "response.created", "response": {"id": "resp_1", "object": "realtime.response",
                                                      "status": "in_progress", "output": []}},
             {"type": "response.output_item.added", "response_id": "resp_1", "output_index": 0, "item": item},
             {"type": "conversation.item.added", "previous_item_id": None, "item": item},
             {"type": "response.output_audio_transcript.delta", "response_id": "resp_1", "item_id": "item_a",
              "output_index": 0, "content_index": 0, "delta": " ".join(f"w{k}" for k in range(400))},
             {"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "item_a",
              "output_index": 0, "content_index": 0, "delta": audio})
    protocol.data_to_send()
    block = np.zeros(480, np.int16)
    for k in range(25):  # half a second heard
        machine.playout.read_into(block, 0.02 * k)
        machine.tick(0.02 * (k + 1))
    protocol.connection_lost()
    machine.connection_lost(0.5, 1006, "gone")
    heard = machine.mirror.get("item_a").heard_text  # type: ignore[union-attr]
    fresh, out, _restored = _reconnect(machine, 1_000)
    assert _texts(out) == heard and len([e for e in out if e["type"] == "conversation.item.create"]) > 1
    for event in out:
        if event["type"] == "conversation.item.create":
            _receive(machine, fresh, {"type": "conversation.item.added", "previous_item_id": event["previous_item_id"],
                                      "item": {**event["item"], "object": "realtime.item", "status": "completed"}})
    _drop(machine, fresh)
    _again, out, _restored = _reconnect(machine, 1_000)
    assert _texts(out) == heard


def test_an_item_that_cannot_be_split_for_the_new_connection_is_counted_and_the_rest_rebuilt() -> None:
    machine, protocol = _machine(20_000_000)
    _tool_called(machine, protocol, json.dumps({"notes": "x" * 70_000}))  # a call's arguments are one string
    machine.send_text("short")
    _echoed(machine, protocol, "item_f")
    _drop(machine, protocol)
    _fresh, out, restored = _on_a_call(machine)  # before, the refused item ended the reconnect
    assert restored.skipped_items == 1 and restored.replayed_items == 1
    created = [e for e in out if e["type"] == "conversation.item.create"]
    assert [e["item"]["content"][0]["text"] for e in created] == ["short"]  # the call left out, its output with it
    assert created[0]["previous_item_id"] == "root"  # after the last item sent, not the one left out
    assert [item.id for item in machine.mirror.items()] == [created[0]["item"]["id"]]  # as the new server has it


def test_a_users_untranscribed_turn_too_large_for_one_event_goes_as_several_in_order() -> None:
    """Over WebRTC with push-to-talk the journal keeps a committed turn until its transcript comes; rebuilt on a
    new call its audio is split into user audio items that fit, and the next item goes after the last of them."""
    machine = SessionMachine(SessionSettings(api_key="k", transport="webrtc", turn_detection="none"), PlayoutBuffer())
    protocol = RealtimeProtocol()
    machine.attach(protocol)
    machine.start_talking(0.0)
    said = np.concatenate([np.full(480, k % 300 + 1, np.int16) for k in range(150)])  # three seconds
    for k in range(150):
        machine.captured(said[480 * k: 480 * (k + 1)], 0.02 * k, media=True)
    machine.release_talking(3.0)
    machine.commit_talking(3.0)
    user = {"id": "item_u1", "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}]}
    _receive(machine, protocol, {"type": "input_audio_buffer.committed", "previous_item_id": None, "item_id": "item_u1"},
             {"type": "conversation.item.added", "previous_item_id": None, "item": user})
    machine.send_text("and then?")
    _echoed(machine, protocol, "item_u1")
    _drop(machine, protocol)
    _fresh, out, restored = _on_a_call(machine)
    created = [e for e in out if e["type"] == "conversation.item.create"]
    audio = [e for e in created if e["item"]["content"][0]["type"] == "input_audio"]
    assert len(audio) == 3 and audio[0]["item"]["id"] == "item_u1" and restored.skipped_items == 0
    heard = np.concatenate([np.frombuffer(base64.b64decode(e["item"]["content"][0]["audio"]), "<i2") for e in audio])
    assert np.array_equal(heard, said)  # the whole turn, once, in order
    chain = ["root", *(e["item"]["id"] for e in created[:-1])]
    assert [e["previous_item_id"] for e in created] == chain and created[-1]["item"]["content"][0]["text"] == "and then?"


@pytest.mark.slow
async def test_over_webrtc_a_text_too_large_for_the_call_is_refused_and_the_session_goes_on() -> None:
    key = "sk-message-size"
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=key)) as server:
        settings = SessionSettings(url=server.http_url, api_key=key, transport="webrtc")
        async with VoiceSession(settings) as session:
            transport = session._link.conn.transport  # type: ignore[union-attr]
            assert isinstance(transport, WebRTCTransport) and transport.max_message_bytes == 262_144
            with pytest.raises(ConfigurationError, match=r"^send_text: the text is 300002 bytes as JSON, and one "
                                                         r"event on this connection carries at most 262144 bytes$"):
                await session.send_text("x" * 300_000)  # before: aiortc's ValueError from the data channel
            assert session.connected
            await session.send_text("hello")
            async with asyncio.timeout(20):
                await until(session, lambda e: isinstance(e, ResponseFinished))


@pytest.mark.slow
async def test_a_server_event_larger_than_the_client_takes_is_an_error_event_and_the_call_goes_on() -> None:
    """A text within the call's limit as the client writes it (raw UTF-8) is twice that in the local server's echo
    (non-ASCII escaped). Before, the server's data channel refused the echo, the call died without a word, and the
    client heard of it only when its liveness watchdog fired 30 s later, then resent the text into the same death."""
    key = "sk-message-size"
    sideband: list[dict[str, Any]] = []
    async with serve(ServerConfig(port=0, voice="tone", speed=4.0, api_key=key)) as server:
        settings = SessionSettings(url=server.http_url, api_key=key, transport="webrtc")
        async with VoiceSession(settings) as session:
            assert session.call_id is not None
            backend = VoiceSession(SessionSettings(url=server.url, api_key=key, call_id=session.call_id),
                                   on_wire=lambda way, text: sideband.append(json.loads(text)) if way == "in" else None)
            async with backend:
                await session.send_text("漢" * 70_000)  # 210 000 bytes here, 420 000 in the echo
                async with asyncio.timeout(20):
                    events = await until(session, lambda e: isinstance(e, ResponseFinished))
                    await until(backend, lambda e: isinstance(e, ResponseFinished))
            errors = [e for e in events if isinstance(e, SessionError)]
            assert errors and all("event (4" in e.message and "was not sent" in e.message for e in errors)
            assert session.connected and not any(isinstance(e, ConnectionLost) for e in events)
    # the sideband's WebSocket takes what the call's channel could not: the events themselves, not the call's error
    # (before: the error took their place on the sideband too)
    echoed = [e for e in sideband if e["type"] in ("conversation.item.added", "conversation.item.done")
              and e["item"].get("role") == "user"]
    assert echoed and all(e["item"]["content"][0]["text"] == "漢" * 70_000 for e in echoed)
    assert not any(e["type"] == "error" for e in sideband)


@pytest.mark.parametrize("live", [True, False])
def test_an_update_whose_whole_configuration_does_not_fit_is_refused_live_or_away(live: bool) -> None:
    """Each field fits, but ``session.update`` carries the whole configuration: accepted while away, it would be
    refused on every new call and the session could not come back."""
    from voxline.session.tools import ToolRegistry

    registry = ToolRegistry()

    @registry.tool(description="d" * 3_000)
    def lookup(query: str) -> str:
        return query
    machine = SessionMachine(SessionSettings(api_key="k", turn_detection="none"), PlayoutBuffer(), registry=registry)
    protocol = RealtimeProtocol()
    protocol.max_event_bytes = LIMIT
    machine.attach(protocol)
    if not live:
        protocol.connection_lost()
        machine.connection_lost(0.0, 1006, "gone")
    with pytest.raises(ConfigurationError, match=r"^update: the session's configuration would be \d+ bytes as JSON, "
                                                 r"and one event on this connection carries at most 65536 bytes$"):
        machine.update(instructions="i" * 63_000)
    assert machine.settings.instructions is None
    machine.update(instructions="i" * 50_000)  # fits
    assert machine.settings.instructions == "i" * 50_000


def test_an_output_queued_while_away_is_sized_again_for_the_new_connection() -> None:
    """The tool finished while away: its output fitted the old connection (a WebSocket), not the new call. Before,
    the restore raised on it and the session failed."""
    machine, protocol = _machine(20_000_000)
    _tool_called(machine, protocol)
    assert machine.calls.begin("call_1")
    _drop(machine, protocol)
    machine.calls.on_result("call_1", "z" * 100_000)  # queued while away
    _fresh, out, _restored = _on_a_call(machine)
    outputs = [e["item"]["output"] for e in out if e.get("item", {}).get("type") == "function_call_output"]
    assert len(outputs) == 1 and "too large to send: 100000 bytes" in outputs[0]


def test_a_tool_output_too_large_for_the_new_call_is_rebuilt_as_a_note_beside_its_call() -> None:
    """Before, the output was left out and its call kept: the model saw a call with no answer."""
    machine, protocol = _machine(20_000_000)
    _tool_called(machine, protocol)
    assert machine.calls.begin("call_1")
    machine.calls.on_result("call_1", "z" * 100_000)
    machine.drain_tools()
    _echoed(machine, protocol, "item_f")
    _drop(machine, protocol)
    _fresh, out, restored = _on_a_call(machine)
    items = [e["item"] for e in out if e["type"] == "conversation.item.create"]
    assert [i["type"] for i in items] == ["function_call", "function_call_output"] and restored.skipped_items == 0
    assert "too large to carry over" in items[1]["output"]


def test_a_call_too_large_for_the_new_call_is_left_out_with_its_output() -> None:
    """Its arguments do not fit: the call is left out, and the result of the tool still running is not sent for a
    call the new conversation lacks."""
    machine, protocol = _machine(20_000_000)
    _tool_called(machine, protocol, json.dumps({"text": "a" * 70_000}))
    assert machine.calls.begin("call_1")
    _drop(machine, protocol)
    fresh, out, restored = _on_a_call(machine)
    assert not any(e["type"] == "conversation.item.create" for e in out) and restored.skipped_items == 1
    machine.calls.on_result("call_1", "done")
    machine.drain_tools()
    assert not [t for t in fresh.data_to_send() if '"function_call_output"' in t]
