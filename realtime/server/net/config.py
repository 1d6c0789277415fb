"""Settings of the local server (``voxline serve``) and its fault injection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from voxline.base.arguments import as_error, clock_like, flag, real, text, whole
from voxline.base.clock import Clock, RealClock
from voxline.realtime.errors import ConfigurationError, UsageError
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES
from voxline.base.urls import is_loopback
from voxline.realtime.server.engine.responses import MAX_BURST_S, STREAM_BURST_S
from voxline.realtime.server.net.call_slots import default_max_calls
from voxline.realtime.server.live.settings import LiveConfig

__all__ = ["CLOSE_TIMEOUT_S", "FaultConfig", "ServerConfig", "wire_text"]

CLOSE_TIMEOUT_S = 10.0
"""How long a close the server makes waits, by default, for the client to take it (``ServerConfig.close_timeout_s``)."""



def wire_text(message: str | bytes) -> str:
    """How ``ServerConfig.on_wire`` shows a client's frame or data channel message: text as it came, binary by
    its size alone."""
    return message if isinstance(message, str) else f"<binary frame, {len(message)} bytes>"

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

    def __post_init__(self) -> None:
        with as_error(ConfigurationError, "FaultConfig"):
            for name in ("drop_after_events", "close_after_events"):
                if (count := getattr(self, name)) is not None:
                    whole(count, name, low=0)
            # a code a close frame may carry: 1000-1003, 1007-1014, or an application's 3000-4999
            code = whole(self.close_code, "close_code", low=1000, high=4999)
            if code in (1004, 1005, 1006, 1015) or 1016 <= code < 3000:
                raise ValueError(f"close_code takes a code a close frame may carry, not {code}")
            whole(self.reject_first_connections, "reject_first_connections", low=0)
            real(self.send_delay_s, "send_delay_s", low=0)


@dataclass(frozen=True)
class ServerConfig:
    """How to run the local server.

    ``speed`` paces assistant audio as a multiple of real time (``math.inf``:
    instant); the steps of a reply due within ``burst_s`` of each other go out together, in one
    socket write (the service's stream, too, arrives in bursts; 0 sends each at its time). ``voice`` is ``"auto"`` (espeak-ng when installed, else ``tone``),
    ``"espeak"``, ``"espeak:<variant>"`` or ``"tone"``. ``scenario`` is a TOML path
    or a built-in name (``default``, ``long``, ``tools``). ``transcripts`` scripts what the
    user says, one entry per user audio turn, in place of the scenario's ``user_says``
    (the server streams them as input transcripts). ``hearing`` is ``"auto"`` (recognise unscripted
    user speech when ``voxline[asr]`` is installed), ``"on"`` (require it) or ``"off"``; what it
    hears is machine-made and approximate. ``on_wire`` observes every
    frame as ``("in" | "out", text)`` from the server's point of view.
    ``reject_in_band`` answers bad credentials or a missing ``model`` the way the
    real service does (handshake accepted, ``error`` event, close 3000/4000)
    instead of with HTTP 401/400. ``session_identity`` (on by default) adds ``id``, ``object`` and
    ``expires_at`` to ``session.created`` / ``session.updated`` (the service sends
    them; the SDK's session model does not declare them). A host that is not
    loopback requires ``api_key``. ``live`` holds the knobs of Live sessions (``/v1/live/sessions``).
    ``close_timeout_s`` bounds every close the server makes (its shutdown, a session's end): a client
    that has not taken the close frame and answered it by then has its connection aborted. A close that
    first flushes the session's last events (an expiry's ``session_expired``) gives that flush as long.
    ``max_calls`` bounds the WebRTC calls (Realtime and GPT-Live) running at once; an offer past it is answered
    ``503`` ``too_many_calls`` (:mod:`~voxline.realtime.server.net.call_slots`; by default half the process's
    descriptor limit at four a call, at most 1024).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    api_key: str | None = field(default=None, repr=False)
    scenario: str | Path | None = None
    transcripts: tuple[str, ...] | None = None
    hearing: str = "auto"
    voice: str = "auto"
    speed: float = 4.0
    chunk_ms: int = 100
    burst_s: float = STREAM_BURST_S
    response_latency_s: float = 0.0
    max_session_s: float = 3600.0
    max_frame_bytes: int = MAX_CLIENT_EVENT_BYTES
    close_timeout_s: float = CLOSE_TIMEOUT_S
    max_calls: int = field(default_factory=default_max_calls)
    session_identity: bool = True
    reject_in_band: bool = False
    seed: int | None = None
    reuse_port: bool = False
    faults: FaultConfig = field(default_factory=FaultConfig)
    live: LiveConfig = field(default_factory=LiveConfig)
    on_wire: Callable[[str, str], None] | None = field(default=None, repr=False)
    clock: Clock = field(default_factory=RealClock, repr=False)

    def __post_init__(self) -> None:
        with as_error(UsageError, "ServerConfig"):  # a value no server takes: a bad flag, on the command line
            self._check()
        if not is_loopback(self.host) and not self.api_key:
            raise UsageError(f"binding to {self.host} (not loopback) requires an API key (--api-key)")

    def _check(self) -> None:
        """Every field of the right kind and in range (see :mod:`voxline.base.arguments`)."""
        if text(self.host, "host").startswith("["):
            raise ValueError(f"host takes an address without brackets ({self.host.strip('[]')!r}), not {self.host!r}")
        whole(self.port, "port", low=0, high=65535)
        if self.api_key is not None:
            text(self.api_key, "api_key")
            if not (self.api_key.isascii() and self.api_key.isprintable()) or self.api_key != self.api_key.strip():
                # a client sends it in an Authorization header, printable ASCII with no space around it: no request
                # could ever carry this one, and every one would be refused
                raise ValueError("api_key takes printable ASCII with no space around it (as a client sends it in "
                                 "its Authorization header), not a key with other characters")
        if self.scenario is not None and not isinstance(self.scenario, Path):
            text(self.scenario, "scenario")
        if self.transcripts is not None:
            if isinstance(self.transcripts, str) or not isinstance(self.transcripts, (list, tuple)):
                raise TypeError(f"transcripts takes a list of strings, one per user turn, not "
                                f"{type(self.transcripts).__name__}")
            for said in self.transcripts:
                text(said, "each of transcripts", empty=True)
            object.__setattr__(self, "transcripts", tuple(self.transcripts))
        if text(self.hearing, "hearing") not in ("auto", "on", "off"):
            raise ValueError(f"hearing takes auto, on or off, not {self.hearing!r}")
        text(self.voice, "voice")
        real(self.speed, "speed", low=0, above=True, finite=False)
        whole(self.chunk_ms, "chunk_ms", low=1)
        real(self.burst_s, "burst_s", low=0, high=MAX_BURST_S)
        real(self.response_latency_s, "response_latency_s", low=0)
        real(self.max_session_s, "max_session_s (the session length limit, in seconds)", low=0, above=True)
        whole(self.max_frame_bytes, "max_frame_bytes", low=1)
        real(self.close_timeout_s, "close_timeout_s", low=0, above=True)
        whole(self.max_calls, "max_calls (WebRTC calls at once)", low=1)
        for name in ("session_identity", "reject_in_band", "reuse_port"):
            flag(getattr(self, name), name)
        if self.seed is not None:
            whole(self.seed, "seed")
        if not isinstance(self.faults, FaultConfig):
            raise TypeError(f"faults takes a FaultConfig, not {type(self.faults).__name__}")
        if not isinstance(self.live, LiveConfig):
            raise TypeError(f"live takes a LiveConfig, not {type(self.live).__name__}")
        if self.on_wire is not None and not callable(self.on_wire):
            raise TypeError(f"on_wire takes a function of (direction, text), not {type(self.on_wire).__name__}")
        clock_like(self.clock)
