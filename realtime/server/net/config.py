"""Settings of the local server (``voxline serve``) and its fault injection."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from voxline.base.clock import Clock, RealClock
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.live.settings import LiveConfig

__all__ = ["FaultConfig", "ServerConfig", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Faults injected on purpose, per WebSocket connection.

    - ``drop_after_events``: after sending this many server events, drop the TCP
      connection without a close frame.
    - ``close_after_events`` / ``close_code``: after this many events, close
      cleanly with ``close_code`` (default 1011).
    - ``reject_first_connections``: answer the first N WebSocket handshakes of the
      server with HTTP 503 (for reconnect tests).
    - ``send_delay_s``: extra delay before each batch of server events.
    """

    drop_after_events: int | None = None
    close_after_events: int | None = None
    close_code: int = 1011
    reject_first_connections: int = 0
    send_delay_s: float = 0.0


@dataclass(frozen=True)
class ServerConfig:
    """How to run the local server.

    ``speed`` paces assistant audio as a multiple of real time (``math.inf``:
    instant). ``voice`` is ``"auto"`` (espeak-ng when installed, else ``tone``),
    ``"espeak"``, ``"espeak:<variant>"`` or ``"tone"``. ``scenario`` is a TOML path
    or a built-in name (``default``, ``long``, ``tools``). ``transcripts`` scripts what the
    user says, one entry per user audio turn, in place of the scenario's ``user_says``
    (the server streams them as input transcripts; it does not recognise speech). ``on_wire`` observes every
    frame as ``("in" | "out", text)`` from the server's point of view.
    ``reject_in_band`` answers bad credentials or a missing ``model`` the way the
    real service does (handshake accepted, ``error`` event, close 3000/4000)
    instead of with HTTP 401/400. ``session_identity`` (on by default) adds ``id``, ``object`` and
    ``expires_at`` to ``session.created`` / ``session.updated`` (the service sends
    them; the SDK's session model does not declare them). A host that is not
    loopback requires ``api_key``. ``live`` holds the knobs of Live sessions (``/v1/live/sessions``).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    api_key: str | None = field(default=None, repr=False)
    scenario: str | Path | None = None
    transcripts: tuple[str, ...] | None = None
    voice: str = "auto"
    speed: float = 4.0
    chunk_ms: int = 100
    response_latency_s: float = 0.0
    max_session_s: float = 3600.0
    max_frame_bytes: int = 20 * 1024 * 1024
    session_identity: bool = True
    reject_in_band: bool = False
    seed: int | None = None
    reuse_port: bool = False
    faults: FaultConfig = field(default_factory=FaultConfig)
    live: LiveConfig = field(default_factory=LiveConfig)
    on_wire: Callable[[str, str], None] | None = field(default=None, repr=False)
    clock: Clock = field(default_factory=RealClock, repr=False)

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.api_key:
            raise ConfigurationError(f"binding to {self.host} (not loopback) requires an API key (--api-key)")
        if not (self.speed > 0 or math.isinf(self.speed)):
            raise ConfigurationError("speed must be positive (or inf for instant)")
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"invalid port {self.port}")
        if self.chunk_ms <= 0 or self.max_frame_bytes <= 0:
            raise ConfigurationError("chunk_ms and max_frame_bytes must be positive")
        if not (math.isfinite(self.max_session_s) and self.max_session_s > 0):
            limit = self.max_session_s
            raise ConfigurationError(f"the session length limit must be a positive number of seconds, not {limit}")
