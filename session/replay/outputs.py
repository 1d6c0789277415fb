"""A replay's streamed outputs (``HEARD.wav``, ``EVENTS.jsonl``) against the last run's.

The files are written as the run goes, so they are opened before the session connects. The last
run's are set aside meanwhile (:class:`~voxline.base.set_aside.SetAside`); the server's first event
keeps the new ones. A run that ends, one way or another, without a single event from its server
(a refused connection, a server that hangs up or stays silent) fails as such and puts the last
run's files back. One replay and each recording of a farm go through :class:`ReplayOutputs`.

The documents made from those files once the run is over (a summary, a report, a stereo file) go
when the run begins, at the server's first event: a run killed outright then (SIGKILL, out of
memory) leaves no last run's verdict beside its own audio, where it would pass for this run's.
A run that never began leaves them with the last run's files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from voxline.base.files import drop_stale
from voxline.base.set_aside import SetAside
from voxline.realtime.errors import ConnectionFailed
from voxline.realtime.frames import is_event

from .result import ReplayResult

__all__ = ["NEVER_SPOKE", "ReplayOutputs"]

NEVER_SPOKE = "the server accepted the connection but never sent an event (not even session.created)"


class ReplayOutputs:
    """``with ReplayOutputs(paths).run() as outputs:`` open the writers, replay with
    ``on_wire=outputs.wire(observer)``, then ``outputs.ended(result)``. ``documents``: the last run's
    documents made from ``paths``, removed when the run begins."""

    def __init__(self, paths: list[Path], documents: Iterable[Path] = ()) -> None:
        self._paths = paths
        self._documents = list(documents)
        self._aside: SetAside | None = None

    @property
    def server_spoke(self) -> bool:
        return self._aside is not None and self._aside.kept

    @contextlib.contextmanager
    def run(self) -> Iterator[ReplayOutputs]:
        self._aside = SetAside(self._paths)
        try:
            yield self
        except BaseException:
            self._aside.put_back()
            raise
        self._aside.keep_new()

    def wire(self, observer: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """``observer``, after a look at each frame for the server's first event."""
        aside = self._aside
        assert aside is not None, "wire() inside run()"

        def observe(direction: str, text: str) -> None:
            if direction == "in" and not aside.kept and is_event(text):
                aside.keep_new()  # the run began: its files are the ones to keep
                for document in self._documents:  # and the last run's verdict on its own files goes
                    drop_stale(document)
            observer(direction, text)

        return observe

    def stopped_unanswered(self, result: ReplayResult) -> bool:
        """Did a stop end the run before the server's first event? Then nothing was replayed, and the
        last run's files are put back (the new ones are closed by then)."""
        if self.server_spoke or not result.interrupted:
            return False
        assert self._aside is not None, "stopped_unanswered() inside run()"
        self._aside.put_back()
        return True

    def ended(self, result: ReplayResult) -> None:
        """Raise :class:`ConnectionFailed` if the server never sent an event (unless a stop cut the run short)."""
        if not self.server_spoke and not result.interrupted:
            raise ConnectionFailed(NEVER_SPOKE)
