"""The session's event queue: events in order, and an end that stops every reader without losing an event."""

from __future__ import annotations

import asyncio

import pytest

from voxline.session.event_queue import EventQueue


def test_readers_get_every_event_in_order_then_the_end_and_the_end_stays() -> None:
    async def run() -> None:
        queue: EventQueue[int] = EventQueue()
        queue.put(1)
        queue.put_all([2, 3])
        queue.end()
        queue.end()
        assert [await queue.get(), await queue.get()] == [1, 2]
        assert queue.drain() == [3]
        for _ in range(2):  # the end stays for every later reader
            with pytest.raises(StopAsyncIteration):
                await queue.get()
            assert queue.drain() == []
        queue.put(4)  # put after the end (a close's last records): still read, then the end again
        assert await queue.get() == 4
        with pytest.raises(StopAsyncIteration):
            await queue.get()

    asyncio.run(run())


def test_a_cancelled_wait_loses_nothing_and_a_waiting_reader_wakes_at_the_end() -> None:
    async def run() -> None:
        queue: EventQueue[str] = EventQueue()
        waiting = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)  # it waits on the empty queue
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        queue.put("kept")
        assert await queue.get() == "kept"
        readers = [asyncio.ensure_future(queue.get()) for _ in range(3)]  # three readers, all waiting
        await asyncio.sleep(0)
        queue.end()
        for reader in readers:
            with pytest.raises(StopAsyncIteration):
                await reader

    asyncio.run(run())
