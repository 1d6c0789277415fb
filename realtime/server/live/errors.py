"""Errors of a Live session, in the Live ``error`` event's shape.

A Live ``error`` names the client command it answers twice: ``client_event_id`` on the event
and inside ``error``. The specs themselves are the Realtime engine's
(:class:`~voxline.realtime.server.engine.errors.ErrorSpec`: message, code, param, type), so
a malformed field reads the same on both APIs. Codes the local server names itself, because
the service's are not published, are marked *local*:

==================================  =====================================================
code                                when
==================================  =====================================================
``session_not_started`` (*local*)   a command before ``session.start``
``session_already_started`` (*local*)  a second ``session.start``
``unsupported_model`` (*local*)     a model that is not a Live model
``invalid_value``                   an audio format, voice, history item or payload out of bounds
``delegation_type_mismatch`` (*local*)  an update or command that needs another delegation type
``not_supported_locally`` (*local*)  Decisions commands: the stand-in has no Decisions backend
``fixture_active`` (*local*)        a second fixture, or an append while one plays
==================================  =====================================================
"""

from __future__ import annotations

from typing import Any

from voxline.realtime.server.engine.errors import ErrorSpec

__all__ = [
    "already_started",
    "delegation_mismatch",
    "fixture_active",
    "live_error_event",
    "not_started",
    "not_supported_locally",
    "unsupported_model",
]


def live_error_event(spec: ErrorSpec, event_id: str, client_event_id: str | None) -> dict[str, Any]:
    """The whole Live ``error`` server event for ``spec``."""
    error: dict[str, Any] = {
        "type": spec.type,
        "code": spec.code or "invalid_request_error",
        "message": spec.message,
        "param": spec.param,
    }
    event: dict[str, Any] = {"type": "error", "event_id": event_id, "error": error}
    if client_event_id is not None:
        error["client_event_id"] = client_event_id
        event["client_event_id"] = client_event_id
    return event


def not_started() -> ErrorSpec:
    return ErrorSpec("Send session.start first, and wait for session.started before other commands.",
                     "session_not_started", "type")


def already_started() -> ErrorSpec:
    return ErrorSpec("The session has already started; session.start is only accepted once.",
                     "session_already_started", "type")


def unsupported_model(model: str) -> ErrorSpec:
    return ErrorSpec(f"The model '{model[:80]}' is not a Live model (use gpt-live-1 or gpt-live-1.1).",
                     "unsupported_model", "session.model")


def delegation_mismatch(what: str, needed: str, current: str) -> ErrorSpec:
    return ErrorSpec(f"{what} needs {needed} delegation; this session uses {current} delegation.",
                     "delegation_type_mismatch", "session.delegation.type" if what == "session.update" else "type")


def not_supported_locally(type_: str) -> ErrorSpec:
    return ErrorSpec(f"'{type_}' is not supported by the voxline local server (it has no Decisions backend).",
                     "not_supported_locally", "type")


def fixture_active() -> ErrorSpec:
    return ErrorSpec("An audio fixture is playing; wait for session.output_audio.fixture.played.",
                     "fixture_active", None)
