"""What a new connection owes the conversation, decided on plain values (sans-I/O).

:func:`creates_owed` picks the ``response.create`` payloads a restore sends, each exactly
once; :func:`handover_due` says when a connection is close enough to its ``expires_at`` for
the session to move to a fresh one. ``VoiceSession`` applies both.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Any

__all__ = ["MAX_SESSION_S", "PLAIN_CREATE", "Owed", "creates_owed", "handover_due"]

Owed = tuple[str | None, dict[str, Any]]  # (response id if the server named it, the create as sent)
PLAIN_CREATE: dict[str, Any] = {"type": "response.create"}


def creates_owed(owed: Iterable[Owed], followed_up: Set[str], *, cut_short: bool, texts_while_away: int
                 ) -> list[dict[str, Any]]:
    """The creates to send after a rebuild.

    * each create the lost connection owed (in flight or queued), except for a response with
      tool calls, which the tool tracker follows up once its outputs are in (``followed_up``:
      its ``response.done`` lost with the connection, or its calls still running);
    * one more when the drop cut a reply short for the listener and nothing else asks for one
      (a tool still running does: its output brings the create), so the model goes on from what
      was heard;
    * one for each message sent while the session was away.
    """
    creates = [dict(payload) for rid, payload in owed if rid is None or rid not in followed_up]
    if cut_short and not creates and not followed_up:
        creates.append(dict(PLAIN_CREATE))
    creates.extend(dict(PLAIN_CREATE) for _ in range(texts_while_away))
    return creates


MAX_SESSION_S = 3600.0  # the service's longest session; what a connection is assumed to get when its times disagree


def handover_due(expires_at: object, *, opened_at: float, elapsed_s: float, margin_s: float,
                 server_clock: bool) -> bool:
    """Is a connection that opened at ``opened_at`` (unix s) and has lived ``elapsed_s`` in its hand-over window?

    Its life is ``expires_at - opened_at``: read on the server's clock where the connection
    told it (``server_clock``: the handshake's ``Date``, or the in-process engine's clock), so
    a skewed local clock changes nothing. On the local wall clock instead, a life that is
    not plausible for the service (not between half of ``MAX_SESSION_S`` and a minute more
    than it) is taken as ``MAX_SESSION_S``: a skewed clock then causes at most one hand-over
    per connection. The elapsed time is the connection's own, on the session's clock.

    The window is the last ``margin_s`` seconds of the life, but at most its last quarter (a
    60-s test session hands over in its last 15 s). ``margin_s`` 0, or no usable
    ``expires_at``, means never.
    """
    if not margin_s or not isinstance(expires_at, (int, float)) or isinstance(expires_at, bool) or expires_at <= 0:
        return False
    lifetime = float(expires_at) - opened_at
    if server_clock:
        lifetime = max(1.0, lifetime)
    elif not MAX_SESSION_S / 2 <= lifetime <= MAX_SESSION_S + 60.0:
        lifetime = MAX_SESSION_S
    return elapsed_s >= lifetime - min(margin_s, lifetime / 4)
