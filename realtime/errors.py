"""The one exception tree of voxline.

::

    RealtimeError
    ├── ConfigurationError          bad settings, flags or credentials (user mistakes)
    ├── ProtocolError
    │   ├── LocalProtocolError      we were asked to send something the protocol forbids
    │   └── RemoteProtocolError     the peer sent something we cannot make sense of
    ├── ServerError                 an ``error`` event that ended an operation (code, message, param)
    ├── TransportError              the connection could not be made or broke
    │   ├── ConnectionFailed        could not connect (refused, bad URL, rejected token)
    │   └── ConnectionClosed        the connection ended, with close code and reason
    ├── AudioError                  devices and files (missing device, unreadable WAV)
    └── ToolError                   tool registration and dispatch

Messages never contain keys or tokens: every constructor that may see one
redacts it through :func:`redact`.
"""

from __future__ import annotations

import re

__all__ = [
    "AudioError",
    "ConfigurationError",
    "ConnectionClosed",
    "ConnectionFailed",
    "LocalProtocolError",
    "ProtocolError",
    "RealtimeError",
    "RemoteProtocolError",
    "ServerError",
    "ToolError",
    "TransportError",
    "redact",
]

_SECRET = re.compile(r"\b(sk-[A-Za-z0-9_\-]{4,}|ek_[A-Za-z0-9_\-]{4,}|Bearer\s+\S+)")


def redact(text: str) -> str:
    """Replace anything that looks like an API key, ephemeral key or bearer token."""
    return _SECRET.sub("[redacted]", text)


class RealtimeError(Exception):
    """Base of every error voxline raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigurationError(RealtimeError):
    """Bad configuration: a wrong flag, a missing key, a non-loopback bind without a key."""


class ProtocolError(RealtimeError):
    """A violation of the Realtime protocol."""


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol forbids (e.g. truncate a user item)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something that is not valid protocol (malformed JSON, bad fields)."""


class ServerError(RealtimeError):
    """An ``error`` event from the server that failed an operation."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        error_type: str | None = None,
        param: str | None = None,
        event_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.error_type = error_type
        self.param = param
        self.event_id = event_id


class TransportError(RealtimeError):
    """The transport failed."""


class ConnectionFailed(TransportError):
    """The connection could not be established."""


class ConnectionClosed(TransportError):
    """The connection is closed; ``code`` and ``reason`` are the WebSocket close frame's."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        self.code = code
        self.reason = redact(reason)
        super().__init__(f"connection closed (code {code}{', ' + self.reason if self.reason else ''})")


class AudioError(RealtimeError):
    """Sound devices and audio files."""


class ToolError(RealtimeError):
    """Tool registration or dispatch."""
