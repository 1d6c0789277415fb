"""The local server's network side: WebSocket sessions and HTTP endpoints on one port.

- ``GET /v1/realtime?model=…`` (WebSocket, ``Authorization: Bearer …``): a
  Realtime session driven by :class:`~voxline.realtime.server.engine.core.Engine`.
- ``POST /v1/realtime/client_secrets``: ephemeral keys
  (:mod:`voxline.realtime.server.engine.http_api`).
- ``POST /v1/realtime/calls`` (SDP offer, or multipart ``sdp`` + ``session``): a WebRTC
  session (:mod:`voxline.realtime.server.net.webrtc`); ``POST /v1/realtime/calls/{id}/hangup`` ends it.
- ``GET /v1/realtime?call_id=…`` (WebSocket, the API key): a sideband socket on a running
  call (:mod:`voxline.realtime.server.net.sideband`).
- ``OPTIONS`` on any path (a browser's preflight): ``204``; every HTTP answer allows any origin
  and exposes ``Location`` (:mod:`voxline.realtime.server.engine.cors`), so a page can post its offer.
- ``GET /v1/realtime?intent=transcription`` (no ``model``): a transcription session, whose
  input transcripts come from the scenario's script or the server's recogniser
  (:mod:`voxline.realtime.server.hearing`, with ``voxline[asr]``).

Admission, as the brief for ``voxline serve`` asks: a missing bearer token → HTTP
401 ``Missing bearer or basic authentication in header``; a wrong one → 401
``invalid_api_key``; no ``model`` → 400 ``missing_model``. With
``ServerConfig.reject_in_band`` the server instead does what the real service
does: accept the handshake, send the ``error`` event and close with 3000
(credentials) or 4000 (request shape). ``OpenAI-Beta: realtime=v1`` is always
answered in band: ``beta_api_shape_disabled``, then close 4000.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from collections.abc import Generator
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.datastructures import Headers
from websockets.http11 import Response

from voxline.base import collector
from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.base.redaction import install_log_redaction, redact
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.cors import is_preflight, preflight, with_cors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.http_api import Credentials, error_body, mint_client_secret
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import Scenario, load_scenario, with_transcripts
from voxline.realtime.server.engine.speech import Synth, VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.hearing.ears import Ears, load_ears
from voxline.realtime.server.live.routes import LiveRoutes
from voxline.realtime.server.net.call_slots import CallSlots
from voxline.realtime.server.net.config import ServerConfig
from voxline.realtime.server.net.connection import HttpHandler, routing_connection
from voxline.realtime.server.net.sideband import Sideband, call_not_found, sideband_needs_api_key
from voxline.realtime.server.net.webrtc import CALLS_PATH, RealtimeCalls
from voxline.realtime.server.net.ws_session import close_reason, run_engine, send_error_and_close

__all__ = ["Server", "serve"]

install_log_redaction()  # websockets.server logs every handshake header, Authorization included, at DEBUG

_REALTIME_PATH = "/v1/realtime"
_SECRETS_PATH = "/v1/realtime/client_secrets"
_DEFAULT_MODEL = DEFAULT_REALTIME_MODEL
OPEN_TIMEOUT_S = 10.0
"""How long a connection has to send its request whole and be answered (an HTTP request, an SDP offer) or to
finish its WebSocket handshake; a request not received whole by then is answered 408."""


class Server:
    """A running local server; an async context manager that closes it on exit."""

    def __init__(
        self, config: ServerConfig, scenario: Scenario, synth: Synth, voice: str, voices: VoiceCache | None = None,
        ears: Ears | None = None,
    ) -> None:
        self.config = config
        self.ears = ears
        self.scenario = scenario
        self.voice = voice
        self._synth = synth
        self._voices = voices if voices is not None else VoiceCache()
        self._ids = IdFactory(config.seed)
        self._session_ids = IdFactory(None if config.seed is None else config.seed + 1)  # each session's, derived
        self._credentials = Credentials(config.api_key, self._ids)
        self._rejected = 0
        self._ws: Any = None
        self._routes: dict[tuple[str, str], HttpHandler] = {("POST", _SECRETS_PATH): self._client_secrets}
        slots = CallSlots(config.max_calls)  # Realtime calls and Live WebRTC sessions alike hold a peer connection
        self._calls = RealtimeCalls(config, self._credentials, scenario, synth, self._voices, self._engine_config,
                                    slots, ears)
        self._routes[("POST", CALLS_PATH)] = self._calls.create
        self._live = LiveRoutes(config, self._credentials, scenario, synth, self._voices, slots)

    @property
    def port(self) -> int:
        return int(self._ws.sockets[0].getsockname()[1])

    @property
    def host(self) -> str:
        host = self.config.host
        return f"[{host}]" if ":" in host else host

    @property
    def url(self) -> str:
        """WebSocket base URL for ``AsyncOpenAI(websocket_base_url=…)``: ``ws://host:port/v1``."""
        return f"ws://{self.host}:{self.port}/v1"

    @property
    def http_url(self) -> str:
        """HTTP base URL for ``AsyncOpenAI(base_url=…)``: ``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> Server:
        factory = routing_connection(self._http)
        self._ws = await ws_serve(
            self._session,
            self.config.host,
            self.config.port,
            process_request=self._admit,
            process_response=_json_refusal,
            create_connection=factory,
            max_size=4 * self.config.max_frame_bytes,
            open_timeout=OPEN_TIMEOUT_S,
            close_timeout=self.config.close_timeout_s,  # every close within it: RoutingConnection.close
            server_header="voxline-local-server",
            reuse_port=self.config.reuse_port or None,
            logger=_WebSocketLog(logging.getLogger("websockets.server"), {}),
        )
        return self

    async def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            await self._ws.wait_closed()
        await self._calls.close()
        await self._live.close()

    async def serve_forever(self) -> None:
        await self._ws.serve_forever()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # HTTP.

    def add_route(self, method: str, path: str, handler: HttpHandler) -> None:
        """Answer ``method path`` (any method but ``GET``) with ``handler``, e.g. an SDP endpoint."""
        self._routes[(method.upper(), path.rstrip("/"))] = handler

    async def _http(self, request: HttpRequest) -> HttpResponse:
        """Every answer readable from a browser page on another origin, as the service's are."""
        if is_preflight(request):
            return preflight(request)
        return with_cors(await self._dispatch(request))

    async def _dispatch(self, request: HttpRequest) -> HttpResponse:
        handler = self._routes.get((request.method, request.path.rstrip("/")))
        if handler is None and request.method == "POST" and request.path.startswith(CALLS_PATH + "/"):
            handler = self._calls.action
        if handler is None and self._live.handles(request.path):
            handler = self._live.http
        if handler is None:
            return HttpResponse(404, error_body(ErrorSpec(f"Unknown endpoint {request.method} {request.path}.", None)))
        return await handler(request)

    async def _client_secrets(self, request: HttpRequest) -> HttpResponse:
        return mint_client_secret(request, self._credentials, _DEFAULT_MODEL, self.config.clock.wall())

    def _admit(self, connection: ServerConnection, request: Any) -> Response | None:
        """``process_request``: refuse bad paths, injected rejections and (by default) bad admission."""
        if self._live.handles(_path(request.path)):
            if len(request.headers.get_all("Authorization")) > 1:
                return _json_response(connection, 400, error_body(errors.duplicate_header("Authorization")))
            refusal = self._live.problem(_path(request.path), _authorization(request.headers))
            return None if refusal is None else _json_response(connection, refusal[0], error_body(refusal[1]))
        if _path(request.path).rstrip("/") != _REALTIME_PATH:
            # the path alone: a query may carry a key, which is not said back
            return _json_response(connection, 404, error_body(ErrorSpec(f"Unknown path {_path(request.path)}.", None)))
        if self._rejected < self.config.faults.reject_first_connections:
            self._rejected += 1
            return _json_response(
                connection, 503, error_body(ErrorSpec("Injected fault: try again.", None, type="server_error"))
            )
        if self.config.reject_in_band or _is_beta(request.headers):
            return None
        problem = self._problem(request)
        if problem is None:
            return None
        auth = problem.code in (None, "invalid_api_key")  # a missing bearer has no code
        status = 401 if auth else {"call_not_found": 404}.get(problem.code or "", 400)
        return _json_response(connection, status, error_body(problem))

    def _problem(self, request: Any) -> ErrorSpec | None:
        for name in ("Authorization", "Host"):
            if len(request.headers.get_all(name)) > 1:
                return errors.duplicate_header(name)
        token = self._credentials.bearer(_authorization(request.headers))
        if token is None:
            return errors.auth_missing()
        if not self._credentials.accepts(token, self.config.clock.wall()):
            return errors.invalid_api_key()
        query = _query(request.path)
        if "call_id" in query:  # a sideband controls a call, whatever else the URL asks: only an API key may
            if not self._credentials.is_api_key(token):  # an ephemeral key, even the one that made the call
                return sideband_needs_api_key()
            call_id = query["call_id"][0]
            return None if self._calls.find(call_id) is not None else call_not_found(call_id)
        if "intent" in query:
            intent = query["intent"][0]
            if intent != "transcription":
                return errors.invalid_choice("intent", intent, ("transcription",))
            if query.get("model", [""])[0]:  # the service's answer to a model on a transcription session
                message = "You must not provide a model parameter for transcription sessions."
                return ErrorSpec(message, "invalid_model", "model")
            return None
        if not query.get("model", [""])[0]:
            return errors.missing_model()
        return None

    # WebSocket sessions.

    async def _session(self, connection: ServerConnection) -> None:
        request = connection.request
        assert request is not None
        if self._live.handles(_path(request.path)):
            await self._live.session(connection)
            return
        if _is_beta(request.headers):
            spec = errors.beta_disabled()
            await send_error_and_close(
                connection, self.config, spec.to_event(self._ids.new("event"), None), 4000, close_reason(spec)
            )
            return
        problem = self._problem(request)
        if problem is not None:
            code = 3000 if problem.code in (None, "invalid_api_key") else 4000
            await send_error_and_close(
                connection, self.config, problem.to_event(self._ids.new("event"), None), code, close_reason(problem)
            )
            return
        token = self._credentials.bearer(_authorization(request.headers)) or ""
        query = _query(request.path)
        if "call_id" in query:
            await self._sideband(connection, query["call_id"][0])
            return
        transcription = query.get("intent", [""])[0] == "transcription"
        try:
            engine = Engine(
                self._engine_config(query.get("model", [""])[0], transcription=transcription),
                self.scenario,
                self._voices,
                wall_time=self.config.clock.wall(),
                ids=self._session_ids.derived(),
                initial_session=self._credentials.session_for(token, self.config.clock.wall()),
            )
        except RequestRejected as exc:  # a client secret's session this socket cannot start (a realtime one for a
            spec = exc.spec              # transcription intent): said, as the calls endpoint says it, not a 1011
            await send_error_and_close(connection, self.config, spec.to_event(self._ids.new("event"), None), 4000,
                                       close_reason(spec))
            return
        await run_engine(connection, engine, self.config, self._synth, self.ears)

    async def _sideband(self, connection: ServerConnection, call_id: str) -> None:
        call = self._calls.find(call_id)
        if call is None:  # it ended since the handshake
            spec = call_not_found(call_id)
            await send_error_and_close(
                connection, self.config, spec.to_event(self._ids.new("event"), None), 4000, close_reason(spec)
            )
            return
        await call.attach(Sideband(connection))

    def _engine_config(self, model: str, *, transcription: bool = False) -> EngineConfig:
        config = self.config
        return EngineConfig(
            model=model,
            transcription=transcription,
            pacing=Pacing(speed=config.speed, chunk_ms=config.chunk_ms, latency_s=config.response_latency_s,
                          burst_s=config.burst_s),
            max_session_s=config.max_session_s,
            session_identity=config.session_identity,
            max_event_bytes=config.max_frame_bytes,
            hearing=self.ears is not None,
        )


class _Serving:
    """What :func:`serve` returns: ``await`` it, or use it with ``async with``."""

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self._server: Server | None = None

    async def _start(self) -> Server:
        config = self._config
        scenario = load_scenario(config.scenario)
        if config.transcripts is not None:
            scenario = with_transcripts(scenario, config.transcripts)
        synth, voice = make_synth(config.voice)
        voices = await asyncio.to_thread(warm_up, scenario, synth)
        ears = load_ears(config.hearing)
        collector.settle()  # the voices and scenario live as long as the server: no collector pause walks them
        self._server = await Server(config, scenario, synth, voice, voices, ears).start()
        return self._server

    def __await__(self) -> Generator[Any, None, Server]:
        return self._start().__await__()

    async def __aenter__(self) -> Server:
        return await self._start()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            await self._server.close()


class _WebSocketLog(logging.LoggerAdapter[logging.Logger]):
    """websockets' own log, but a client gone during the opening handshake (a reset, a half request, a
    session cancelled while it opened) is one debug line, not an error with a traceback."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg == "opening handshake failed":
            failure = sys.exc_info()[1]
            self.logger.debug("opening handshake failed: %s", f"{type(failure).__name__}: {failure}" if failure else "?")
            return
        super().log(level, msg, *args, **kwargs)


def serve(config: ServerConfig) -> _Serving:
    """Start the local server: ``server = await serve(cfg)`` or ``async with serve(cfg) as server``."""
    if not isinstance(config, ServerConfig):
        raise ConfigurationError("serve() needs a ServerConfig")
    return _Serving(config)


def _path(target: str) -> str:
    """The path of a request target; never raises (``urlsplit`` does on ``//[`` targets)."""
    return target.partition("?")[0].partition("#")[0]


def _query(target: str) -> dict[str, list[str]]:
    return parse_qs(target.partition("?")[2].partition("#")[0])


def _authorization(headers: Headers) -> str | None:
    """The one ``Authorization`` header (``_problem`` refuses a repeated one first)."""
    values = headers.get_all("Authorization")
    return values[0] if values else None


def _is_beta(headers: Headers) -> bool:
    return any(value.strip().lower().startswith("realtime") for value in headers.get_all("OpenAI-Beta"))


def _json_refusal(connection: ServerConnection, request: Any, response: Response) -> Response | None:
    """``process_response``: websockets' own refusals (a handshake without ``Upgrade``, a bad
    ``Sec-WebSocket-Key``…) are plain text; answer them in the service's JSON error shape."""
    if response.status_code < 400 or response.headers.get_all("Content-Type") != ["text/plain; charset=utf-8"]:
        return None
    text = response.body.decode("utf-8", "replace").strip().splitlines()
    kind = "server_error" if response.status_code >= 500 else "invalid_request_error"
    spec = ErrorSpec(_unquoted(text[0]) if text else "Request refused.", None, type=kind)
    body = json.dumps(error_body(spec)).encode()
    headers = Headers([(k, v) for k, v in response.headers.raw_items() if k.lower() not in ("content-type", "content-length")])
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = str(len(body))
    return Response(response.status_code, response.reason_phrase, headers, body)


_QUOTED_VALUE = re.compile(r"(invalid [^:]*? header)(?:: .*?)?(\.?)$")


def _unquoted(message: str) -> str:
    """websockets' refusal without the header value it quotes ("invalid Sec-WebSocket-Protocol header: …"): a
    browser's subprotocols carry its key, and a client may put one anywhere. What is left is redacted too."""
    return redact(_QUOTED_VALUE.sub(r"\1\2", message))


def _json_response(connection: ServerConnection, status: int, body: dict[str, Any]) -> Response:
    response = connection.respond(status, json.dumps(body))
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response
