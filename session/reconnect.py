"""When to try to reconnect, and when to give up (sans-I/O).

One budget covers a run of failures: at most ``attempts`` tries and ``window_s`` seconds
from the first drop, with jittered exponential backoff between tries. A connection that
opens and then closes at once (a server that accepts and hangs up, or fails right after the
handshake) does not refill the budget: only one that stayed up for ``stable_s`` seconds does.
So a broken server costs a bounded number of tries and then one fatal error.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable

from voxline.base.contain import contain
from voxline.base.errors import message_of

__all__ = ["Backoff", "ReconnectBudget", "exponential_backoff"]

Backoff = Callable[[int], float]  # reconnect attempt (0, 1, ...) → seconds to wait before it


def exponential_backoff(first_s: float = 0.2, cap_s: float = 5.0, *, jitter: float = 0.2,
                        rng: random.Random | None = None) -> Backoff:
    """``first_s · 2^attempt``, at most ``cap_s``, spread by ± ``jitter`` of itself."""
    source = rng or random.Random()

    def delay(attempt: int) -> float:
        base = min(cap_s, first_s * 2.0 ** attempt)
        return base * (1.0 + jitter * (2.0 * source.random() - 1.0))

    return delay


class ReconnectBudget:
    """Tries and time left for the current run of failures; times are seconds on one clock."""

    def __init__(self, attempts: int, window_s: float, *, stable_s: float = 30.0,
                 backoff: Backoff | None = None) -> None:
        self.attempts = attempts
        self.window_s = window_s
        self.stable_s = stable_s
        self._backoff = backoff or exponential_backoff()
        self._used = 0
        self._since: float | None = None  # start of the current run of failures
        self._short_holds = 0  # connections restored in the current run that dropped before stable_s
        self._out_of = "reconnect_attempts"  # what the last refused try ran out of
        self.backoff_failure: str | None = None
        """Why the app's backoff failed, once it did (the default backoff stands in from then on)."""

    @property
    def used(self) -> int:
        return self._used

    def lost(self, now: float, connected_at: float | None, heard_until: float | None = None) -> None:
        """A connection ended at ``now``; it had opened at ``connected_at`` (None: never opened) and, when it was
        given up for its silence, held only until ``heard_until``, when the server last spoke: a server that
        stalls every connection soon after it opens spends the budget, though each is given up only after the
        liveness timeout (past ``stable_s``)."""
        held_until = now if heard_until is None else heard_until
        stable = connected_at is not None and held_until - connected_at >= self.stable_s
        if stable or self._since is None:
            self._used = 0
            self._since = now
            self._short_holds = 0
        elif connected_at is not None:
            self._short_holds += 1

    def time_left(self, now: float) -> float:
        """Seconds left of ``window_s`` in the current run of failures (all of it before the run began)."""
        return self.window_s if self._since is None else max(0.0, self.window_s - (now - self._since))

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next try, or None when the budget is spent."""
        if self._since is None:
            self._since = now
        if self._used >= self.attempts:
            self._out_of = "reconnect_attempts"
            return None
        try:
            answer = self._backoff(self._used)
            if inspect.iscoroutine(answer):  # an async def: never run here, and closed so no warning says so later
                answer.close()
                raise TypeError("it is a coroutine function: give a plain function that returns seconds")
            delay = max(0.0, float(answer))
            if delay != delay or delay == float("inf"):
                raise ValueError(f"{delay} is no delay")
        except BaseException as exc:  # an app's backoff: its failure must not end the reconnect
            contain(exc)
            self.backoff_failure = f"{type(exc).__name__}: {message_of(exc)}"
            self._backoff = exponential_backoff()
            delay = self._backoff(self._used)
        if now + delay - self._since > self.window_s:
            self._out_of = "reconnect_window_s"
            return None
        self._used += 1
        return delay

    def spent(self, now: float) -> str:
        """How the budget was spent, once :meth:`next_delay` refused a try: the tries and time since the run of
        failures began, which limit ran out, and restored connections that dropped too soon to refill it (a second
        drop soon after a restore gets no tries of its own when the first used them up)."""
        tries = f"{self._used} {'try' if self._used == 1 else 'tries'}"
        since = 0.0 if self._since is None else now - self._since
        limit = (f"reconnect_attempts is {self.attempts}" if self._out_of == "reconnect_attempts"
                 else f"reconnect_window_s is {self.window_s:g} s")
        text = f"{tries} in {since:.1f} s since the first drop; {limit}"
        if self._short_holds:
            held = "a connection" if self._short_holds == 1 else f"{self._short_holds} connections"
            text += f"; {held} restored in between dropped within reconnect_stable_s ({self.stable_s:g} s)"
        return text
