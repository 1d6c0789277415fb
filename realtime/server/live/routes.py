"""The Live endpoints of the local server, under ``/v1/live/sessions``.

========================================  ==================================================
``GET /v1/live/sessions`` (WebSocket)     a session; the first frame is ``session.start``
``GET …/{id}/attach`` (WebSocket)         a sideband on a running session (API key only)
``GET …/{id}/fork`` (WebSocket)           a new session continuing a stored, closed one
``POST /v1/live/sessions``                a WebRTC session: ``{"session", "transport"}``
``POST …/{id}/fork``                      a WebRTC fork of a stored, closed session
``POST …/{id}/hangup``                    end a running session (``close_requested``)
========================================  ==================================================

Every request authenticates with ``Authorization: Bearer`` (the server's key, or an ephemeral
key it minted); refusals are HTTP errors in the service's JSON shape, before any WebSocket
opens. A WebRTC session takes one of the server's places for calls (``ServerConfig.max_calls``, shared
with Realtime calls: ``503 too_many_calls`` when none is free). The server hooks these in with
:meth:`LiveRoutes.handles`, :meth:`LiveRoutes.problem`, :meth:`LiveRoutes.session` and :meth:`LiveRoutes.http`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.server import ServerConnection

from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.http_api import Credentials, KeyOwners, error_body
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.speech import Synth, VoiceCache
from voxline.realtime.server.live.engine import LiveEngine
from voxline.realtime.server.live.hub import MAX_STORED, LiveHub, StoredSession
from voxline.realtime.server.live.rtc import LiveCall, read_offer
from voxline.realtime.server.live.settings import fork_settings, start_settings
from voxline.realtime.server.live.ws import attach_sideband, run_live_socket
from voxline.realtime.server.net.call_slots import CallSlots
from voxline.realtime.server.net.rtc_offer import close_abandoned
from voxline.realtime.server.net.config import ServerConfig

__all__ = ["LIVE_PATH", "LiveRoutes"]

LIVE_PATH = "/v1/live/sessions"
MAX_OWNERS = 4 * MAX_STORED  # sessions an ephemeral key started, remembered so that it acts on them alone


def session_not_found(session_id: str) -> ErrorSpec:
    return ErrorSpec(f"Live session '{session_id[:80]}' not found.", "session_not_found", "session_id")


def not_forkable(session_id: str, why: str) -> ErrorSpec:
    return ErrorSpec(f"Live session '{session_id[:80]}' cannot be forked: {why}.", "session_not_forkable", "session_id")


class LiveRoutes:
    """The Live side of the server: its endpoints, its running and stored sessions."""

    def __init__(
        self, config: ServerConfig, credentials: Credentials, scenario: Scenario, synth: Synth, voices: VoiceCache,
        slots: CallSlots,
    ) -> None:
        self.config = config
        self._slots = slots  # the server's places for WebRTC calls, Realtime's and these
        self.hub = LiveHub()
        self._credentials = credentials
        self._scenario = scenario
        self._synth = synth
        self._voices = voices
        self._ids = IdFactory(None if config.seed is None else config.seed + 5)
        self._session_ids = IdFactory(None if config.seed is None else config.seed + 6)  # each session's, derived
        self._tasks: set[asyncio.Task[None]] = set()
        self._owners = KeyOwners(credentials, MAX_OWNERS)  # running or stored sessions, and what started them

    @staticmethod
    def handles(path: str) -> bool:
        path = path.rstrip("/")
        return path == LIVE_PATH or path.startswith(LIVE_PATH + "/")

    # WebSocket.

    def problem(self, path: str, authorization: str | None) -> tuple[int, ErrorSpec] | None:
        """Why a WebSocket handshake on ``path`` is refused (HTTP status and error), or ``None``."""
        token = self._credentials.bearer(authorization)
        if token is None:
            return 401, errors.auth_missing()
        if not self._credentials.accepts(token, self.config.clock.wall()):
            return 401, errors.invalid_api_key()
        session_id, verb = _split(path)
        if not session_id and not verb:
            return None
        if verb == "attach":
            if not self._credentials.is_api_key(token):
                return 401, ErrorSpec("A sideband needs the API key, not an ephemeral key.", "invalid_api_key")
            return None if self.hub.find(session_id) is not None else (404, session_not_found(session_id))
        if verb == "fork":
            return self._fork_problem(session_id, token)
        return 404, ErrorSpec(f"Unknown path {path[:120]}.", None)

    async def session(self, connection: ServerConnection) -> None:
        """Serve an admitted WebSocket on a Live path."""
        request = connection.request
        assert request is not None
        session_id, verb = _split(request.path.partition("?")[0])
        if verb == "attach":
            running = self.hub.find(session_id)
            if running is not None:
                await attach_sideband(connection, running, self.config)
            return
        stored = self.hub.stored(session_id) if verb == "fork" else None
        engine = self.new_engine(stored)
        self._owners.own(engine.session_id, self._credentials.bearer(request.headers.get("Authorization")) or "")
        await run_live_socket(connection, engine, self.hub, self.config, self._synth)

    def new_engine(self, stored: StoredSession | None = None) -> LiveEngine:
        common: dict[str, Any] = {
            "wall_time": self.config.clock.wall(),
            "ids": self._session_ids.derived(),
            "max_event_bytes": self.config.max_frame_bytes,
        }
        if stored is not None:
            # the stored conversation is in the fork's settings (its startup input): its own history begins empty,
            # or a fork of the fork would be given the first session's words twice
            common.update(turn_index=stored.turn_index, user_turns=stored.user_turns, fork_of=stored.fork_base())
        return LiveEngine(self.config.live, self._scenario, self._voices, **common)

    def _fork_problem(self, session_id: str, token: str) -> tuple[int, ErrorSpec] | None:
        if not self._owners.may_act(token, session_id):  # an ephemeral key learns nothing of others' sessions
            return 404, session_not_found(session_id)
        if self.hub.find(session_id) is not None:
            return 400, not_forkable(session_id, "it is still running; fork it once it has closed")
        if self.hub.stored(session_id) is None:
            return 404, session_not_found(session_id)
        return None

    # HTTP.

    async def http(self, request: HttpRequest) -> HttpResponse:
        """``POST`` requests under ``/v1/live/sessions``."""
        token = self._credentials.bearer(request.headers.get("authorization"))
        if token is None:
            return HttpResponse(401, error_body(errors.auth_missing()))
        if not self._credentials.accepts(token, self.config.clock.wall()):
            return HttpResponse(401, error_body(errors.invalid_api_key()))
        session_id, verb = _split(request.path)
        if request.method == "POST" and not session_id:
            return await self._webrtc(request, None, token)
        if request.method == "POST" and verb == "fork":
            refusal = self._fork_problem(session_id, token)
            if refusal is not None:
                return HttpResponse(refusal[0], error_body(refusal[1]))
            return await self._webrtc(request, self.hub.stored(session_id), token)
        if request.method == "POST" and verb == "hangup":
            running = self.hub.find(session_id)
            if running is None or not self._owners.may_act(token, session_id):
                return HttpResponse(404, error_body(session_not_found(session_id)))
            running.route(running.engine.close("close_requested"))
            return HttpResponse(200, {})
        return HttpResponse(404, error_body(ErrorSpec(f"Unknown endpoint {request.method} {request.path[:120]}.", None)))

    async def _webrtc(self, request: HttpRequest, stored: StoredSession | None, token: str) -> HttpResponse:
        """A WebRTC session (or fork): answer the offer, then serve the call in a task of its own."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type and content_type != "application/json":  # a bare SDP offer, as Realtime calls take
            message = (f"Unsupported content type {content_type[:80]!r}: send the session and the SDP offer as "
                       "application/json, {\"session\": …, \"transport\": {\"type\": \"webrtc\", \"sdp\": …}}.")
            return HttpResponse(400, error_body(ErrorSpec(message, "unsupported_content_type")))
        try:
            session, offer = read_offer(request.body)
            engine = self.new_engine(stored)
            if stored is None:
                if session is None:  # a new session names its model there (a fork inherits it)
                    raise RequestRejected(errors.missing_parameter("session"))
                settings = start_settings(session, "webrtc")
            else:
                settings = fork_settings(stored.fork_base(), {} if session is None else session, "webrtc")
        except RequestRejected as exc:
            return HttpResponse(400, error_body(exc.spec))
        if not self._slots.take():  # before the peer connection, as a Realtime call's: they share the places
            return self._slots.refusal("a GPT-Live WebRTC session")
        call: LiveCall | None = None
        try:
            call = LiveCall(engine, settings, self.hub, self.config, self._synth)
            answer = await call.answer(offer)
        except BaseException as exc:  # no session started: its place is free again
            self._slots.give_back()
            if isinstance(exc, RequestRejected):  # the offer refused, its peer connection closed (a second close of
                return HttpResponse(400, error_body(exc.spec))  # one half set up may never end)
            if call is not None:
                await close_abandoned(call.pc)  # given up on (the request's deadline, the server closing): its sockets too
            raise
        self._owners.own(engine.session_id, token)
        task = asyncio.create_task(call.run(), name=f"voxline Live call {engine.session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        body = {"session": {"id": engine.session_id}, "transport": {"type": "webrtc", "sdp": answer}}
        return HttpResponse(200, body)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A WebRTC session ended: forget it and free its place."""
        self._tasks.discard(task)
        self._slots.give_back()

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _split(path: str) -> tuple[str, str]:
    """``/v1/live/sessions/{id}/{verb}`` → ``(id, verb)``; ``("", "")`` for the collection itself."""
    rest = path.rstrip("/")[len(LIVE_PATH):].lstrip("/")
    session_id, _, verb = rest.partition("/")
    return session_id, verb if session_id else ""
