"""What a session hands its application: events in order, and an end that never loses one.

Once :meth:`EventQueue.end` is called, no reader waits again: the iterator and
:meth:`EventQueue.drain` give every event still queued (those put after the end too, such as
the records a close adds after a failed reconnect ended the stream), then stop, however often
a reader comes back.

One task reads at a time: a second task asking while another waits is refused
(:class:`~voxline.realtime.errors.ConfigurationError`), since each would get some of the
events and neither all of them. Tasks may take turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Generic, TypeVar

from voxline.realtime.errors import ConfigurationError

__all__ = ["EventQueue"]

T = TypeVar("T")
_END = object()


class EventQueue(Generic[T]):
    """Events for the application, unbounded (the session never blocks on a slow reader)."""

    def __init__(self) -> None:
        self._items: asyncio.Queue[object] = asyncio.Queue()
        self._ended = False
        self._reader: asyncio.Task[object] | None = None  # the task waiting in get(), if one is

    def put(self, event: T) -> None:
        self._items.put_nowait(event)

    def put_all(self, events: Iterable[T]) -> None:
        for event in events:
            self._items.put_nowait(event)

    def end(self) -> None:
        """No reader waits from now on (safe to call twice)."""
        if not self._ended:
            self._ended = True
            self._items.put_nowait(_END)  # wakes a waiting reader; it stays queued for the others

    async def get(self) -> T:
        """The next event; :class:`StopAsyncIteration` once ended and empty. Cancelling a wait loses nothing.
        A second task asking while one waits is refused (see the module docstring)."""
        task = asyncio.current_task()
        if self._reader is not None and self._reader is not task and not self._reader.done():
            raise ConfigurationError("another task is reading this session's events: two readers would each get "
                                     "some of them, and neither all; read them in one task and hand them on")
        self._reader = task
        try:
            while True:
                item = await self._items.get()  # never waits once ended: the end is always queued
                if item is not _END:
                    return item  # type: ignore[return-value]
                self._items.put_nowait(_END)  # for the next reader, behind anything put since
                if self._items.qsize() == 1:
                    raise StopAsyncIteration
        finally:
            self._reader = None

    def drain(self) -> list[T]:
        """The events queued so far, without waiting (a reader then starts after them)."""
        out: list[T] = []
        while not self._items.empty():
            item = self._items.get_nowait()
            if item is not _END:
                out.append(item)  # type: ignore[arg-type]
        if self._ended:
            self._items.put_nowait(_END)
        return out
