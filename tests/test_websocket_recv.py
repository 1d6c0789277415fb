"""The WebSocket transport's receive: the frames one read brought are handed over without waiting
each (no future, no websockets coroutine per frame); fragmented messages still go through websockets."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.server import serve as ws_serve
from websockets.frames import Frame, Opcode

from voxline.realtime.connection import RealtimeConnection, of_type
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.transports.websocket import WebSocketTransport

FRAMES = [json.dumps({"type": "response.output_audio_transcript.delta", "event_id": f"event_{i}", "response_id": "r",
                      "item_id": "i", "output_index": 0, "content_index": 0, "delta": f"w{i} "}) for i in range(60)]


async def _burst(ws: Any) -> None:
    """Every frame written before the client reads once: they arrive in one read."""
    await ws.recv()  # the client is ready
    for text in FRAMES:
        ws.protocol.send_text(text.encode())
    ws.protocol.send_frame(Frame(Opcode.TEXT, b'{"type": "rate_limits.', fin=False))  # one message in two frames
    ws.protocol.send_frame(Frame(Opcode.CONT, b'updated", "event_id": "event_x", "rate_limits": []}'))
    ws.send_data()
    await ws.wait_closed()


async def test_a_burst_of_frames_is_received_with_one_wait_in_order() -> None:
    server = await ws_serve(_burst, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        await transport.send("ready")
        got = [await transport.recv() for _ in range(len(FRAMES) + 1)]
        assert got[:-1] == FRAMES  # in order, each once
        assert json.loads(got[-1])["type"] == "rate_limits.updated"  # the fragmented one, reassembled
        # the first frame of the burst is waited for; the rest were already read (a slow
        # loopback may split the burst over a few reads, never over one read per frame)
        assert transport.waits <= 4, transport.waits
        await transport.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_the_connection_takes_frames_already_read_without_a_wait_each() -> None:
    server = await ws_serve(_burst, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        conn = RealtimeConnection(transport)
        await transport.send("ready")
        deltas = [await conn.recv() for _ in range(len(FRAMES))]
        assert [d.delta for d in deltas] == [f"w{i} " for i in range(len(FRAMES))]  # type: ignore[union-attr]
        assert transport.waits <= 4, transport.waits
        await conn.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_close_while_the_server_still_streams_completes_its_handshake() -> None:
    """Closing while a reply streams in: the frames not read yet are dropped as they come, so the
    server's close frame is read and the close handshake completes (websockets stops reading once
    enough messages wait unread, and the close would otherwise wait for its timeout and abort)."""
    sent = asyncio.Event()
    codes: list[int | None] = []

    async def stream(ws: Any) -> None:
        await ws.recv()  # the client is ready
        for n in range(400):  # far more than websockets queues unread before it stops reading
            await ws.send(json.dumps({"type": "response.output_audio.delta", "event_id": f"event_{n}",
                                      "response_id": "r", "item_id": "i", "output_index": 0,
                                      "content_index": 0, "delta": "AAAA" * 500}))
        sent.set()
        await ws.wait_closed()
        codes.append(ws.close_code)

    server = await ws_serve(stream, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        await transport.send("ready")
        async with asyncio.timeout(10):  # a guard against a hang, not a timing check
            await sent.wait()  # the client has read none of it
        await transport.close(1000, "bye")
        async with asyncio.timeout(10):
            while not codes:
                await asyncio.sleep(0.01)
    finally:
        server.close()
        await server.wait_closed()
    assert codes == [1000]  # the server had the client's close frame
    assert transport._ws.close_code == 1000  # and the client read the server's: the handshake completed, nothing aborted


async def test_a_reader_in_another_task_ends_with_connection_closed_when_the_connection_is_closed() -> None:
    """The close's drain and a reader of the app's may both want the next frame: the reader gets
    the connection's end (ConnectionClosed), never websockets' complaint about two readers."""
    got: list[str] = []
    ended: list[BaseException] = []

    async def stream(ws: Any) -> None:
        await ws.recv()
        for n in range(400):
            await ws.send(json.dumps({"type": "rate_limits.updated", "event_id": f"event_{n}", "rate_limits": []}))
        await ws.wait_closed()

    server = await ws_serve(stream, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        await transport.send("ready")

        async def reader() -> None:
            try:
                while True:
                    got.append(await transport.recv())
                    await asyncio.sleep(0)  # the app does something with each frame
            except BaseException as exc:  # noqa: BLE001 - what ended it is the finding
                ended.append(exc)

        reading = asyncio.ensure_future(reader())
        async with asyncio.timeout(10):  # a guard against a hang, not a timing check
            while len(got) < 30:
                await asyncio.sleep(0)
        await transport.close(1000, "bye")
        async with asyncio.timeout(10):
            await reading
    finally:
        server.close()
        await server.wait_closed()
    assert len(ended) == 1 and isinstance(ended[0], ConnectionClosed), ended


STARTED = of_type("input_audio_buffer.speech_started")


async def test_the_transport_tells_of_a_small_frame_of_a_type_as_it_is_read_and_can_look_for_one() -> None:
    big = json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "event_big", "pad": "AAAA" * 600})
    quoted = json.dumps({"type": "response.output_audio_transcript.delta", "event_id": "event_t",
                         "delta": '{"type": "input_audio_buffer.speech_started"}'})  # escaped inside a string
    bare = json.dumps("input_audio_buffer.speech_started")  # the type's name alone is no event of that type
    started = json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "event_s",
                          "audio_start_ms": 10, "item_id": "item_u"})
    phase = asyncio.Event()

    async def send_in_two_reads(ws: Any) -> None:
        await ws.recv()
        for text in (big, quoted, bare):
            ws.protocol.send_text(text.encode())
        ws.send_data()
        await phase.wait()
        await ws.send(started)
        await ws.wait_closed()

    server = await ws_serve(send_in_two_reads, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        seen: list[int] = []
        transport.watch_for(STARTED, 1024, lambda: seen.append(len(seen)))
        await transport.send("ready")
        assert json.loads(await transport.recv())["event_id"] == "event_big"
        async with asyncio.timeout(10):  # a guard against a hang, not a timing check
            while transport.queued_where(lambda data: b"event_t" in data, 1024, 64) is None:
                await asyncio.sleep(0)
        # too big, escaped in a string, or a bare name: none of them counts
        assert transport.queued_where(STARTED, 1024, 64) is None and seen == []
        phase.set()
        async with asyncio.timeout(10):
            while not seen:
                await asyncio.sleep(0)
        assert transport.queued_where(STARTED, 1024, 64) == 2  # told before it was received; two frames ahead
        assert transport.queued_where(STARTED, 1024, 2) is None  # a look goes no further than asked
        assert json.loads(await transport.recv())["event_id"] == "event_t"
        assert json.loads(await transport.recv()) == "input_audio_buffer.speech_started"
        assert json.loads(await transport.recv())["event_id"] == "event_s"
        assert transport.queued_where(STARTED, 1024, 64) is None and seen == [0]
        await transport.close()
    finally:
        phase.set()  # the handler's wait ends, whatever failed
        server.close()
        await server.wait_closed()


async def test_a_watcher_that_raises_is_logged_and_the_read_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    texts = [json.dumps({"type": "response.output_audio_transcript.delta", "event_id": f"e{i}", "delta": "w"})
             for i in range(5)]
    texts.insert(2, json.dumps({"type": "input_audio_buffer.speech_started", "event_id": "s", "audio_start_ms": 0,
                                "item_id": "u"}))

    async def burst(ws: Any) -> None:
        await ws.recv()
        for text in texts:
            ws.protocol.send_text(text.encode())
        ws.send_data()
        await ws.wait_closed()

    def broken() -> None:
        raise RuntimeError("a watcher's bug")

    server = await ws_serve(burst, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        transport.watch_for(STARTED, 1024, broken)
        await transport.send("ready")
        async with asyncio.timeout(10):  # a guard against a hang, not a timing check
            got = [json.loads(await transport.recv())["event_id"] for _ in texts]
        assert got == ["e0", "e1", "s", "e2", "e3", "e4"]  # every frame of the read, the connection open
        assert transport.close_code is None
        assert "a frame watcher failed" in caplog.text
        await transport.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_the_echo_of_the_largest_event_the_client_may_send_is_received() -> None:
    """The client sends events of up to 20 MiB and the service echoes an item back whole
    (``conversation.item.added``, non-ASCII escaped): the receive limit was 16 MiB, so a 17 MiB text
    closed the connection (1009), and every reconnect sent it again into the same death."""
    from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES

    async def echo(ws: Any) -> None:
        async for message in ws:
            sent = json.loads(message)
            await ws.send(json.dumps({"type": "conversation.item.added", "item": sent["item"]}, ensure_ascii=True))

    text = "é" * ((MAX_CLIENT_EVENT_BYTES - 200) // 2)  # two bytes each as sent, six in the echo
    event = json.dumps({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": text}]}}, ensure_ascii=False)
    assert len(event.encode("utf-8")) <= MAX_CLIENT_EVENT_BYTES
    server = await ws_serve(echo, "127.0.0.1", 0, compression=None, max_size=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        try:
            await transport.send(event)
            async with asyncio.timeout(30):
                echoed = await transport.recv()
            assert len(echoed) > 2 * MAX_CLIENT_EVENT_BYTES
            assert json.loads(echoed)["item"]["content"][0]["text"] == text
        finally:
            await transport.close()
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("together", [True, False], ids=["in-one-read", "alone"])
async def test_a_text_frame_that_is_not_utf8_is_read_with_replacement_characters_and_the_connection_goes_on(
        together: bool) -> None:
    """Before, such a frame taken from the queue raised UnicodeDecodeError out of the receive loop (a fatal session
    error), and one waited for made websockets close with 1007 (a drop); a frame however malformed ends nothing."""
    bad = b'{"type":"info","message":"\xff\xfe ok"}'
    after = json.dumps({"type": "info", "message": "still here"})

    async def send(ws: Any) -> None:
        await ws.recv()  # the client is ready
        ws.protocol.send_text(b'{"type":"info","message":"first"}')
        if not together:
            ws.send_data()
            await ws.recv()  # the client has read the first: the bad frame is read alone, waited for
        ws.protocol.send_text(bad)
        ws.protocol.send_text(after.encode())
        ws.send_data()
        await ws.wait_closed()

    server = await ws_serve(send, "127.0.0.1", 0, compression=None)
    try:
        port = server.sockets[0].getsockname()[1]
        transport = await WebSocketTransport.connect(f"ws://127.0.0.1:{port}/v1", "key", open_timeout=5)
        await transport.send("ready")
        assert json.loads(await transport.recv())["message"] == "first"
        if not together:
            await transport.send("read it")
        assert json.loads(await transport.recv())["message"] == "\ufffd\ufffd ok"
        assert json.loads(await transport.recv())["message"] == "still here"
        await transport.close()
        assert transport.close_code == 1000
    finally:
        server.close()
        await server.wait_closed()
