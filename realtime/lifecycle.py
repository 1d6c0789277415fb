"""The response lifecycle as data: who may speak in the default conversation, and when.

The Realtime service lets one response at a time write to the default conversation
(``conversation_already_has_active_response`` otherwise, docs/protocol.md §7), and
``response.cancel`` with nothing active is an error (``response_cancel_not_active``).
The client therefore tracks a single *slot*:

=================  ==========================================================
``IDLE``           no response is known to be active
``REQUESTED``      we sent ``response.create``; ``response.created`` not seen
``REQUESTED_CANCEL`` as ``REQUESTED``, but the caller already asked to cancel it
``ACTIVE``         a response is running (ours, or one the server's VAD began)
``CANCELLING``     we sent ``response.cancel``; ``response.done`` not seen
=================  ==========================================================

Every ``(slot, input)`` pair has exactly one entry in :data:`TRANSITIONS`, giving
the next slot and the actions the protocol core performs. Property tests walk
the whole table; the core never branches on the slot outside of it.

A second, per-response table (:data:`RESPONSE_TRANSITIONS`) gives each response's
status: requested → active → completed | cancelled | incomplete | failed, or
unknown when the connection is lost before ``response.done``.
"""

from __future__ import annotations

import enum

__all__ = [
    "Action",
    "Input",
    "RESPONSE_TRANSITIONS",
    "ResponseStatus",
    "Slot",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "step",
]


class Slot(enum.Enum):
    IDLE = "idle"
    REQUESTED = "requested"
    REQUESTED_CANCEL = "requested_cancel"
    ACTIVE = "active"
    CANCELLING = "cancelling"


class Input(enum.Enum):
    CREATE = "create"  # the caller asks for a response
    CANCEL = "cancel"  # the caller asks to cancel the active response
    CREATED = "created"  # server: response.created (default conversation)
    DONE = "done"  # server: response.done (default conversation)
    CREATE_REJECTED = "create_rejected"  # error conversation_already_has_active_response for our create
    CREATE_FAILED = "create_failed"  # any other error for our create
    CANCEL_NOT_ACTIVE = "cancel_not_active"  # error response_cancel_not_active for our cancel
    DISCONNECT = "disconnect"  # the connection is gone


class Action(enum.Enum):
    SEND_CREATE = "send_create"  # send the next create now
    QUEUE_CREATE = "queue_create"  # keep the create until the slot frees
    REQUEUE_CREATE = "requeue_create"  # the create in flight was refused: put it back first in line
    DROP_CREATE = "drop_create"  # forget the create in flight (failed or cancelled before start)
    SEND_CANCEL = "send_cancel"  # send response.cancel for the active response
    DROP_LATE = "drop_late"  # from now on, drop deltas of the response being cancelled
    FLUSH_QUEUE = "flush_queue"  # the slot is free: send the first queued create, if any
    LOSE_ALL = "lose_all"  # responses in flight become status unknown


_S, _I, _A = Slot, Input, Action

TRANSITIONS: dict[tuple[Slot, Input], tuple[Slot, tuple[Action, ...]]] = {
    # IDLE
    (_S.IDLE, _I.CREATE): (_S.REQUESTED, (_A.SEND_CREATE,)),
    (_S.IDLE, _I.CANCEL): (_S.IDLE, ()),
    (_S.IDLE, _I.CREATED): (_S.ACTIVE, ()),
    (_S.IDLE, _I.DONE): (_S.IDLE, (_A.FLUSH_QUEUE,)),
    (_S.IDLE, _I.CREATE_REJECTED): (_S.ACTIVE, (_A.REQUEUE_CREATE,)),
    (_S.IDLE, _I.CREATE_FAILED): (_S.IDLE, (_A.DROP_CREATE, _A.FLUSH_QUEUE)),
    (_S.IDLE, _I.CANCEL_NOT_ACTIVE): (_S.IDLE, ()),
    (_S.IDLE, _I.DISCONNECT): (_S.IDLE, (_A.LOSE_ALL,)),
    # REQUESTED: our create is in flight
    (_S.REQUESTED, _I.CREATE): (_S.REQUESTED, (_A.QUEUE_CREATE,)),
    (_S.REQUESTED, _I.CANCEL): (_S.REQUESTED_CANCEL, ()),
    (_S.REQUESTED, _I.CREATED): (_S.ACTIVE, ()),
    (_S.REQUESTED, _I.DONE): (_S.REQUESTED, ()),
    (_S.REQUESTED, _I.CREATE_REJECTED): (_S.ACTIVE, (_A.REQUEUE_CREATE,)),
    (_S.REQUESTED, _I.CREATE_FAILED): (_S.IDLE, (_A.DROP_CREATE, _A.FLUSH_QUEUE)),
    (_S.REQUESTED, _I.CANCEL_NOT_ACTIVE): (_S.REQUESTED, ()),
    (_S.REQUESTED, _I.DISCONNECT): (_S.IDLE, (_A.LOSE_ALL,)),
    # REQUESTED_CANCEL: cancel as soon as the server names the response
    (_S.REQUESTED_CANCEL, _I.CREATE): (_S.REQUESTED_CANCEL, (_A.QUEUE_CREATE,)),
    (_S.REQUESTED_CANCEL, _I.CANCEL): (_S.REQUESTED_CANCEL, ()),
    (_S.REQUESTED_CANCEL, _I.CREATED): (_S.CANCELLING, (_A.SEND_CANCEL, _A.DROP_LATE)),
    (_S.REQUESTED_CANCEL, _I.DONE): (_S.REQUESTED_CANCEL, ()),
    (_S.REQUESTED_CANCEL, _I.CREATE_REJECTED): (_S.ACTIVE, (_A.DROP_CREATE,)),
    (_S.REQUESTED_CANCEL, _I.CREATE_FAILED): (_S.IDLE, (_A.DROP_CREATE, _A.FLUSH_QUEUE)),
    (_S.REQUESTED_CANCEL, _I.CANCEL_NOT_ACTIVE): (_S.REQUESTED_CANCEL, ()),
    (_S.REQUESTED_CANCEL, _I.DISCONNECT): (_S.IDLE, (_A.LOSE_ALL,)),
    # ACTIVE
    (_S.ACTIVE, _I.CREATE): (_S.ACTIVE, (_A.QUEUE_CREATE,)),
    (_S.ACTIVE, _I.CANCEL): (_S.CANCELLING, (_A.SEND_CANCEL, _A.DROP_LATE)),
    (_S.ACTIVE, _I.CREATED): (_S.ACTIVE, ()),
    (_S.ACTIVE, _I.DONE): (_S.IDLE, (_A.FLUSH_QUEUE,)),
    (_S.ACTIVE, _I.CREATE_REJECTED): (_S.ACTIVE, (_A.REQUEUE_CREATE,)),
    (_S.ACTIVE, _I.CREATE_FAILED): (_S.ACTIVE, (_A.DROP_CREATE,)),
    (_S.ACTIVE, _I.CANCEL_NOT_ACTIVE): (_S.ACTIVE, ()),
    (_S.ACTIVE, _I.DISCONNECT): (_S.IDLE, (_A.LOSE_ALL,)),
    # CANCELLING
    (_S.CANCELLING, _I.CREATE): (_S.CANCELLING, (_A.QUEUE_CREATE,)),
    (_S.CANCELLING, _I.CANCEL): (_S.CANCELLING, ()),
    (_S.CANCELLING, _I.CREATED): (_S.ACTIVE, ()),
    (_S.CANCELLING, _I.DONE): (_S.IDLE, (_A.FLUSH_QUEUE,)),
    (_S.CANCELLING, _I.CREATE_REJECTED): (_S.CANCELLING, (_A.REQUEUE_CREATE,)),
    (_S.CANCELLING, _I.CREATE_FAILED): (_S.CANCELLING, (_A.DROP_CREATE,)),
    (_S.CANCELLING, _I.CANCEL_NOT_ACTIVE): (_S.IDLE, (_A.FLUSH_QUEUE,)),
    (_S.CANCELLING, _I.DISCONNECT): (_S.IDLE, (_A.LOSE_ALL,)),
}


def step(slot: Slot, event: Input) -> tuple[Slot, tuple[Action, ...]]:
    """Look up one transition; every pair is defined."""
    return TRANSITIONS[(slot, event)]


class ResponseStatus(enum.Enum):
    REQUESTED = "requested"
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    UNKNOWN = "unknown"  # the connection was lost before response.done


TERMINAL_STATUSES = frozenset(
    {
        ResponseStatus.COMPLETED,
        ResponseStatus.CANCELLED,
        ResponseStatus.INCOMPLETE,
        ResponseStatus.FAILED,
        ResponseStatus.UNKNOWN,
    }
)

_R = ResponseStatus
#: Allowed status changes of one response; anything else is ignored (a terminal status is final).
RESPONSE_TRANSITIONS: dict[ResponseStatus, frozenset[ResponseStatus]] = {
    _R.REQUESTED: frozenset({_R.ACTIVE, _R.FAILED, _R.UNKNOWN, *TERMINAL_STATUSES}),
    _R.ACTIVE: frozenset(TERMINAL_STATUSES),
    _R.COMPLETED: frozenset(),
    _R.CANCELLED: frozenset(),
    _R.INCOMPLETE: frozenset(),
    _R.FAILED: frozenset(),
    _R.UNKNOWN: frozenset(),
}
