"""The app's commands to a GPT-Live session as the client events they send, their arguments checked (sans-I/O).

Each builds one :mod:`voxline.realtime.live.events` client event from what the app gave, or raises
one :class:`~voxline.realtime.errors.ConfigurationError` naming what is wrong. Whether the session
can take it now, and where it waits meanwhile, is the machine's
(:meth:`~.machine.LiveMachine.append` and the rest, through :class:`~.carrier.LiveCarrier`).
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import numpy as np

from voxline.base.arguments import as_error, unicode_text
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.live import events as lv

from ..tools.names import chosen_tools

__all__ = ["ContextKind", "context_event", "fixture_event", "offered_schemas", "tools_update"]

ContextKind = Literal["instructions", "thinking", "commentary"]
"""What :meth:`~.machine.LiveMachine.append` appends: kept instructions, silent thinking, or commentary for the model
to say."""


def context_event(content: str, kind: ContextKind, delegation_id: str | None) -> lv.LiveClientEvent:
    """``session.instructions.append``, ``session.thinking.append`` or ``session.commentary.append``."""
    model = {"instructions": lv.LiveInstructionsAppend, "thinking": lv.LiveThinkingAppend,
             "commentary": lv.LiveCommentaryAppend}.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ConfigurationError(f"kind must be instructions, thinking or commentary, not {kind!r}")
    if not isinstance(content, str):
        raise ConfigurationError(f"append takes the content as a string, not {type(content).__name__}")
    if delegation_id is not None and not isinstance(delegation_id, str):
        raise ConfigurationError(f"delegation_id takes a string or None, not {type(delegation_id).__name__}")
    with as_error(ConfigurationError, "append"):
        unicode_text(content, "content")
    event: lv.LiveClientEvent = model(content=content, delegation_id=delegation_id)
    return event


def fixture_event(pcm: np.ndarray) -> lv.LiveFixturePlay:
    """``session.output_audio.fixture.play`` of one whole audio fixture (PCM16 24 kHz mono)."""
    array = np.asarray(pcm)
    if array.dtype != np.int16 or array.ndim != 1:  # a float block cast to int16 would play as silence
        raise ConfigurationError(f"play_fixture takes a 1-D int16 array (PCM16 24 kHz mono), not {array.dtype} "
                                 f"of shape {array.shape}")
    data = np.ascontiguousarray(array, dtype="<i2").tobytes()
    return lv.LiveFixturePlay(audio=base64.b64encode(data).decode("ascii"))


def tools_update(registry: Any | None, tools: Any) -> tuple[lv.LiveUpdate, list[str]] | None:
    """``session.update`` offering the delegated model the registry's ``tools`` (checked with or without a
    registry), and their names; None without a registry: there is nothing to offer."""
    names = chosen_tools(tools, registry.names() if registry is not None else ())
    if registry is None:
        return None
    schemas = registry.schemas(names)
    return lv.LiveUpdate(session={"delegation": {"type": "responses", "responses": {"tools": schemas}}}), names


def offered_schemas(registry: Any | None, offered: list[str] | None) -> list[dict[str, Any]] | None:
    """The tools a new session offers: those :func:`tools_update` last chose (``offered``), else (None) every tool
    of the registry; None without a registry, or with one that has no tools."""
    if registry is None:
        return None
    schemas: list[dict[str, Any]] = registry.schemas(offered)  # None: every tool
    if offered is None and not schemas:
        return None  # a registry without tools offers none
    return schemas
