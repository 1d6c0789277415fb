"""The wire's and the session's errors: the ``RealtimeError`` branch of voxline's one tree.

::

    VoxlineError (voxline.base.errors)
    ├── AudioError                  devices and files (missing device, unreadable WAV)
    └── RealtimeError
    ├── ConfigurationError          bad settings, flags or credentials (user mistakes)
    ├── ProtocolError
    │   ├── LocalProtocolError      we were asked to send something the protocol forbids
    │   └── RemoteProtocolError     the peer sent something we cannot make sense of
    ├── ServerError                 an ``error`` event that ended an operation (code, message, param)
    ├── TransportError              the connection could not be made or broke
    │   ├── ConnectionFailed        could not connect (refused, bad URL, rejected token)
    │   └── ConnectionClosed        the connection ended, with close code and reason
    └── ToolError                   tool registration and dispatch

Messages never contain keys or tokens: the root redacts every message through
:func:`~voxline.base.redaction.redact`.
"""

from __future__ import annotations

from voxline.base.errors import AudioError, VoxlineError
from voxline.base.redaction import redact

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
    "UsageError",
]

class RealtimeError(VoxlineError):
    """The wire, the protocol, the session's configuration and its tools."""


class ConfigurationError(RealtimeError):
    """Bad configuration: a wrong flag, a missing key, a non-loopback bind without a key."""


class UsageError(ConfigurationError):
    """A command line that cannot work as given (a missing argument, flags that exclude each other, a bad
    flag value): the command exits 2, as argparse does for its own usage errors."""


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
    """The connection could not be established; ``status``: the HTTP status that refused it, if one did."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ConnectionClosed(TransportError):
    """The connection is closed; ``code`` and ``reason`` are the WebSocket close frame's."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        self.code = code
        self.reason = redact(reason)
        super().__init__(f"connection closed (code {code}{', ' + self.reason if self.reason else ''})")


class ToolError(RealtimeError):
    """Tool registration or dispatch."""
