"""The official ``openai`` package as the oracle for every GPT-Live wire event.

A Live frame in either direction must validate against ``openai.types.live``'s unions
(``ClientEvent`` / ``ServerEvent``, or the sideband's ``ConnectClientEvent`` /
``ConnectServerEvent``) and carry no key the official models do not know.
"""

from __future__ import annotations

import json
import typing
from typing import Annotated, Any, Union

from openai.types.live import ClientEvent, ConnectClientEvent, ConnectServerEvent, ServerEvent
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from tests.support.oracle import _extras

__all__ = ["LIVE_CLIENT_TYPES", "LIVE_SERVER_TYPES", "LIVE_SIDEBAND_SERVER_TYPES", "check_live_client",
           "check_live_server"]


def _members(alias: Any) -> tuple[type[BaseModel], ...]:
    return typing.get_args(typing.get_args(alias)[0])


def _adapter(alias: Any) -> TypeAdapter[Any]:
    return TypeAdapter(Annotated[Union[_members(alias)], Field(discriminator="type")])  # type: ignore[misc]


def _names(alias: Any) -> frozenset[str]:
    return frozenset(typing.get_args(m.model_fields["type"].annotation)[0] for m in _members(alias))


LIVE_CLIENT_TYPES = _names(ClientEvent)
LIVE_SERVER_TYPES = _names(ServerEvent)
LIVE_SIDEBAND_SERVER_TYPES = _names(ConnectServerEvent)
LIVE_SIDEBAND_CLIENT_TYPES = _names(ConnectClientEvent)
_CLIENT, _SERVER = _adapter(ClientEvent), _adapter(ServerEvent)
_SB_CLIENT, _SB_SERVER = _adapter(ConnectClientEvent), _adapter(ConnectServerEvent)


def _check(adapter: TypeAdapter[Any], event: str | bytes | dict[str, Any], side: str) -> BaseModel:
    raw = json.loads(event) if isinstance(event, (str, bytes)) else event
    try:
        model = adapter.validate_python(raw)
    except ValidationError as exc:
        raise AssertionError(f"Live {side} event {raw.get('type')!r} is not valid per openai: {exc}\n{raw}") from None
    extra = _extras(model)
    if extra:
        raise AssertionError(f"Live {side} event {raw.get('type')!r} has keys openai does not know: {extra}\n{raw}")
    return model


def check_live_client(event: str | bytes | dict[str, Any], *, sideband: bool = False) -> BaseModel:
    return _check(_SB_CLIENT if sideband else _CLIENT, event, "client")


def check_live_server(event: str | bytes | dict[str, Any], *, sideband: bool = False) -> BaseModel:
    return _check(_SB_SERVER if sideband else _SERVER, event, "server")
