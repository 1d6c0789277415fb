"""The server's Live sessions: the running ones (for a sideband to attach to) and the stored ones (to fork).

A running session is a :class:`LiveSession`: its engine, the connection that carries it (its
primary sink) and the sidebands observing it. Every :class:`~voxline.realtime.server.live.engine.Out`
the engine returns goes through :meth:`LiveSession.route`. When a session ends, a stored one
(``store: true``) is kept as a :class:`StoredSession`: its settings, what was said, and where the
scenario stood, so a fork continues the conversation. Stored sessions are kept in memory, the
oldest forgotten past :data:`MAX_STORED`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from voxline.realtime.server.live.engine import LiveEngine, Out
from voxline.realtime.server.live.settings import MAX_INPUT_ITEMS, LiveSettings

__all__ = ["MAX_STORED", "LiveHub", "LiveSession", "Observer", "Sink", "StoredSession"]

MAX_STORED = 256

Sink = Callable[[list[dict[str, Any]]], None]
"""Queues events for one connection, in order."""


class Observer(Protocol):
    """A sideband socket: takes event texts without blocking, closes after what it holds."""

    def push(self, text: str) -> None: ...

    def close(self) -> None: ...


@dataclass
class LiveSession:
    """A running Live session and its audiences."""

    engine: LiveEngine
    primary: Sink
    observers: list[Observer] = field(default_factory=list)
    on_wire: Callable[[str, str], None] | None = None
    on_closed: Callable[[], None] | None = None  # called once, after session.closed went out
    finished: bool = False

    def route(self, outs: list[Out], origin: Observer | None = None) -> None:
        """Queue each event for its audience; ``origin`` is the sideband whose command caused them (else the primary)."""
        primary: list[dict[str, Any]] = []
        observed: list[dict[str, Any]] = []
        back: list[dict[str, Any]] = []
        for out in outs:
            if out.to in ("all", "primary"):
                primary.append(out.event)
            if out.to in ("all", "observers"):
                observed.append(out.event)
            if out.to == "origin":
                back.append(out.event)
        if back:
            if origin is None:
                self.primary(back)
            else:
                self.tell(origin, back)
        if primary:
            self.primary(primary)
        if observed:
            for observer in list(self.observers):
                self.tell(observer, observed)
        if self.engine.closed is not None and not self.finished:
            self.finished = True
            self.close_observers()
            if self.on_closed is not None:
                self.on_closed()

    def tell(self, observer: Observer, events: list[dict[str, Any]]) -> None:
        """Queue ``events`` for one sideband."""
        for event in events:
            text = json.dumps(event)
            observer.push(text)
            if self.on_wire is not None:
                self.on_wire("out", text)

    def attach(self, observer: Observer) -> None:
        self.observers.append(observer)
        self.engine.observers = len(self.observers)

    def detach(self, observer: Observer) -> None:
        if observer in self.observers:
            self.observers.remove(observer)
        self.engine.observers = len(self.observers)

    def close_observers(self) -> None:
        for observer in self.observers:
            observer.close()
        self.observers = []
        self.engine.observers = 0


@dataclass(frozen=True)
class StoredSession:
    """A closed session kept for forking."""

    session_id: str
    settings: LiveSettings
    history: tuple[tuple[str, str], ...]
    turn_index: int
    user_turns: int

    def fork_base(self) -> LiveSettings:
        """The stored settings with the conversation so far as startup history: its newest :data:`MAX_INPUT_ITEMS`
        messages, the bound a client's input has (a chain of forks would otherwise carry every earlier session's
        words, and echo them in each ``session.started``)."""
        said = tuple(_item(role, text) for role, text in self.history)
        return replace(self.settings, input=(self.settings.input + said)[-MAX_INPUT_ITEMS:])


class LiveHub:
    """Running sessions by id, and stored closed ones."""

    def __init__(self) -> None:
        self._running: dict[str, LiveSession] = {}
        self._stored: OrderedDict[str, StoredSession] = OrderedDict()

    def add(self, session: LiveSession) -> None:
        self._running[session.engine.session_id] = session

    def find(self, session_id: str) -> LiveSession | None:
        return self._running.get(session_id)

    def stored(self, session_id: str) -> StoredSession | None:
        return self._stored.get(session_id)

    def ended(self, session: LiveSession) -> None:
        """Forget a running session; keep it for forks when it asked to be stored."""
        engine = session.engine
        self._running.pop(engine.session_id, None)
        if engine.settings is not None and engine.settings.store and engine.closed is not None:
            self._stored[engine.session_id] = StoredSession(
                engine.session_id, engine.settings, tuple(engine.history), engine.turn_index, engine.user_turns
            )
            while len(self._stored) > MAX_STORED:
                self._stored.popitem(last=False)

    def running_ids(self) -> list[str]:
        return list(self._running)


def _item(role: str, text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text} if role == "assistant" else {"type": "input_text", "text": text}
    return {"type": "message", "role": role, "content": [part]}
