"""The session's event queue: events in order, and an end that stops every reader without losing an event."""

from __future__ import annotations

import asyncio

import pytest

from voxline.realtime.errors import ConfigurationError
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
        reader = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)  # it waits
        queue.end()
        with pytest.raises(StopAsyncIteration):
            await reader
        later = asyncio.ensure_future(queue.get())  # another task, after it: the end too
        with pytest.raises(StopAsyncIteration):
            await later

    asyncio.run(run())


def test_a_second_task_reading_while_one_waits_is_refused_and_tasks_may_take_turns() -> None:
    """Two readers at once would each get some of the events and neither all of them (a logging task added beside
    the app's pump): the second is told so at once, and the first reads on, losing nothing."""
    async def run() -> None:
        queue: EventQueue[int] = EventQueue()
        first = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)  # it waits
        second = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)
        assert second.done()  # refused at once: it does not wait beside the first
        with pytest.raises(ConfigurationError, match="^another task is reading this session's events: two readers"):
            await second
        queue.put_all([1, 2])
        assert await first == 1
        assert await asyncio.ensure_future(queue.get()) == 2  # the first is done: another task's turn
        third = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)
        third.cancel()  # a cancelled wait lets go: the next task may read
        with pytest.raises(asyncio.CancelledError):
            await third
        queue.put(3)
        assert await asyncio.ensure_future(queue.get()) == 3

    asyncio.run(run())
