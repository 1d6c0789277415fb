"""``POST /v1/realtime/calls``: WebRTC sessions on the local server (docs/protocol.md §2).

The body is the client's SDP offer (``Content-Type: application/sdp``), or the
"unified" form the SDK's ``calls.create(sdp=…, session=…)`` sends from a server: a
``multipart/form-data`` body with an ``sdp`` part and a ``session`` part (the session
config, JSON, validated like ``session.update``). The caller authenticates like the
WebSocket path (``Authorization: Bearer`` with the server's key or an ``ek_…`` it
minted). The answer is ``201 Created`` with an ``application/sdp`` body and
``Location: /v1/realtime/calls/{call_id}``. Each call runs the same
:class:`~voxline.realtime.server.engine.core.Engine` as a WebSocket session, bridged by
:mod:`voxline.realtime.server.net.rtc_call`. Peers are local: no ICE servers.

:class:`RealtimeCalls` owns the running calls; :meth:`RealtimeCalls.close` ends
them all (the server calls it when it closes). ``POST /v1/realtime/calls/{id}/hangup``
ends one (:meth:`RealtimeCalls.action`), and a sideband socket finds its call with
:meth:`RealtimeCalls.find`. The API key may hang up any call; an ephemeral key only the call
it started: for any other the answer is ``404 call_not_found``, as for a call that does not
exist, so an ephemeral key cannot learn which calls run. At most ``ServerConfig.max_calls`` calls run at once
(:class:`~voxline.realtime.server.net.call_slots.CallSlots`, shared with GPT-Live's WebRTC sessions): an offer past
them is answered ``503 too_many_calls``, and a call's place is free again once it has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from aiortc import RTCConfiguration, RTCPeerConnection

from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.http_api import Credentials, KeyOwners, error_body
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.multipart import boundary_of, parse_form
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.speech import Synth, VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.validate import parse_json
from voxline.realtime.server.net.config import ServerConfig
from voxline.realtime.server.hearing.ears import Ears
from voxline.realtime.server.net.call_slots import CallSlots
from voxline.realtime.server.net.rtc_call import RtcCall
from voxline.realtime.server.net.rtc_offer import answer_offer, close_abandoned
from voxline.realtime.server.net.sideband import call_not_found

__all__ = ["CALLS_PATH", "RealtimeCalls"]

CALLS_PATH = "/v1/realtime/calls"
_DEFAULT_MODEL = DEFAULT_REALTIME_MODEL


class RealtimeCalls:
    """The calls endpoint and the calls it started."""

    def __init__(
        self,
        config: ServerConfig,
        credentials: Credentials,
        scenario: Scenario,
        synth: Synth,
        voices: VoiceCache,
        engine_config: Callable[[str], EngineConfig],
        slots: CallSlots,
        ears: Ears | None = None,
    ) -> None:
        self._ears = ears
        self._slots = slots
        self._config = config
        self._credentials = credentials
        self._scenario = scenario
        self._synth = synth
        self._voices = voices
        self._engine_config = engine_config
        self._ids = IdFactory(None if config.seed is None else config.seed + 3)
        self._session_ids = IdFactory(None if config.seed is None else config.seed + 7)  # each call's, derived
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._calls: dict[str, RtcCall] = {}
        self._owners = KeyOwners(credentials, 4096)  # the calls running, and what started them (forgotten at their end)
        self._failures: list[BaseException] = []

    @property
    def active(self) -> list[str]:
        """Ids of the calls still running."""
        return [call_id for call_id, task in self._tasks.items() if not task.done()]

    def find(self, call_id: str) -> RtcCall | None:
        """The running call ``call_id``, if any."""
        call = self._calls.get(call_id)
        return call if call is not None and not call.ended else None

    async def action(self, request: HttpRequest) -> HttpResponse:
        """``POST /v1/realtime/calls/{call_id}/hangup`` (the other SIP actions are not modelled)."""
        token = self._credentials.bearer(request.headers.get("authorization"))
        if token is None:
            return HttpResponse(401, error_body(errors.auth_missing()))
        if not self._credentials.accepts(token, self._config.clock.wall()):
            return HttpResponse(401, error_body(errors.invalid_api_key()))
        call_id, _, verb = request.path.rstrip("/")[len(CALLS_PATH) + 1 :].partition("/")
        if verb != "hangup":
            return HttpResponse(404, error_body(ErrorSpec(f"Unknown endpoint {request.method} {request.path}.", None)))
        call = self.find(call_id)
        if call is None or not self._owners.may_act(token, call_id):
            return HttpResponse(404, error_body(call_not_found(call_id)))
        call.hangup()
        return HttpResponse(200, {})

    async def create(self, request: HttpRequest) -> HttpResponse:
        """``POST /v1/realtime/calls``: answer the offer and start the call."""
        problem = self._refusal(request)
        if problem is not None:
            return problem
        try:
            offer, session = _offer_and_session(request)
        except RequestRejected as exc:  # the session part is not JSON the service takes
            return HttpResponse(400, error_body(exc.spec))
        except ValueError as exc:
            return HttpResponse(400, error_body(errors.invalid_value(None, f"Invalid request body: {exc}")))
        token = self._credentials.bearer(request.headers.get("authorization")) or ""
        initial = session if session is not None else self._credentials.session_for(token, self._config.clock.wall())
        model = parse_qs(request.query).get("model", [""])[0] or (initial or {}).get("model") or _DEFAULT_MODEL
        try:
            engine = Engine(
                self._engine_config(str(model)),
                self._scenario,
                self._voices,
                wall_time=self._config.clock.wall(),
                ids=self._session_ids.derived(),
                initial_session=initial,
            )
        except RequestRejected as exc:
            return HttpResponse(400, error_body(exc.spec))
        if not self._slots.take():  # before the peer connection, which holds descriptors from here on
            return self._slots.refusal("a WebRTC call")
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        call = RtcCall(self._ids.secret("rtc"), pc, engine, self._config, self._synth, self._ears)
        try:
            answer = await answer_offer(pc, offer, call.output_track, None, call.dropped)
        except BaseException as exc:  # no call started: its place is free again
            self._slots.give_back()
            if isinstance(exc, RequestRejected):  # answer_offer closed the peer connection (a second close of one
                return HttpResponse(400, error_body(exc.spec))  # half set up may never end)
            await close_abandoned(pc)  # given up on (the request's deadline, the server closing): its sockets go too
            raise
        task = asyncio.create_task(call.run(), name=f"voxline call {call.call_id}")
        self._tasks[call.call_id] = task
        self._calls[call.call_id] = call
        self._owners.own(call.call_id, token)
        task.add_done_callback(self._finished)
        return HttpResponse(
            201,
            answer.encode("utf-8"),
            content_type="application/sdp",
            headers={"Location": f"{CALLS_PATH}/{call.call_id}"},
        )

    async def close(self) -> None:
        """End every call and wait until each peer connection is closed; re-raise a call's failure."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._failures:
            raise self._failures[0]

    def _finished(self, task: asyncio.Task[None]) -> None:
        """A call ended: forget it and free its place, keeping its error (if any) for :meth:`close`."""
        self._slots.give_back()
        for call_id in [k for k, t in self._tasks.items() if t is task]:
            self._owners.forget(call_id)
        self._tasks = {k: t for k, t in self._tasks.items() if t is not task}
        self._calls = {k: c for k, c in self._calls.items() if k in self._tasks}
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self._failures.append(error)

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        token = self._credentials.bearer(request.headers.get("authorization"))
        if token is None:
            return HttpResponse(401, error_body(errors.auth_missing()))
        if not self._credentials.accepts(token, self._config.clock.wall()):
            return HttpResponse(401, error_body(errors.invalid_api_key()))
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in ("application/sdp", "multipart/form-data"):
            message = (
                f"Unsupported content type {content_type or '(none)'!r}: send the SDP offer as application/sdp, "
                "or multipart/form-data with 'sdp' and 'session' parts."
            )
            return HttpResponse(400, error_body(ErrorSpec(message, "unsupported_content_type")))
        if not request.body.strip():
            return HttpResponse(400, error_body(errors.invalid_value(None, "The SDP offer is empty.")))
        return None


def _offer_and_session(request: HttpRequest) -> tuple[bytes, dict[str, Any] | None]:
    """The SDP offer and the ``session`` part of a multipart body (``None`` for a bare offer)."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "multipart/form-data":
        return request.body, None
    parts = parse_form(request.body, boundary_of(content_type))
    if "sdp" not in parts:
        raise ValueError("the multipart body has no 'sdp' part")
    if "session" not in parts:
        return parts["sdp"], None
    session = parse_json(parts["session"])  # as every body and frame: bounded depth, no NaN
    if not isinstance(session, dict):
        raise ValueError("the 'session' part is not a JSON object")
    return parts["sdp"], session
