"""Plain HTTP on the server's port: credentials, who owns what, and ``POST /v1/realtime/client_secrets``.

Requests and responses themselves are :mod:`voxline.realtime.server.engine.http_message`'s;
every answer here carries a JSON body, then the connection closes.

``client_secrets`` mints an ephemeral key ``ek_…`` (docs/protocol.md §3): body
``{"expires_after": {"anchor": "created_at", "seconds": 10..7200}, "session": {…}}``,
both optional (default 600 s); reply ``{"value", "expires_at", "session"}``. A key
opens any number of sessions until it expires; each starts with that session
config.
"""

from __future__ import annotations

import heapq
import hmac
import math
from dataclasses import dataclass, field
from typing import Any

from voxline.base.redaction import redact, register_secret
from voxline.base.ordered import keep_newest
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.errors import ErrorSpec, RequestRejected
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.session_config import SessionConfig
from voxline.realtime.server.engine.validate import Field, check_object, parse_json

__all__ = ["MAX_HELD_BYTES", "MAX_LIVE_KEYS", "Credentials", "KeyOwners", "error_body", "mint_client_secret"]

MAX_LIVE_KEYS = 10_000
"""The most ephemeral keys live at once on one server."""
MAX_HELD_BYTES = 64 * 1024 * 1024
"""The most bytes of sessions (as posted) the live ephemeral keys hold."""

_EXPIRES_AFTER = Field(
    ("object",),
    fields={
        "anchor": Field(("string",), choices=("created_at",)),
        "seconds": Field(("integer",), minimum=10, maximum=7200),
    },
)
_SECRET_REQUEST = {"expires_after": _EXPIRES_AFTER, "session": Field(("object",))}


def error_body(spec: ErrorSpec) -> dict[str, Any]:
    """The REST error shape: ``{"error": {message, type, param, code}}``, its message redacted (a path or a value
    it names may hold a key: ``Unknown path /v1/realtime/calls/ek_…``)."""
    return {"error": {"message": redact(spec.message), "type": spec.type, "param": spec.param, "code": spec.code}}


@dataclass
class Credentials:
    """Who may connect: the server's API key (if any) and the ephemeral keys it minted.

    A minted key is kept with its session until it expires (up to two hours); at most :data:`MAX_LIVE_KEYS` at once,
    holding at most :data:`MAX_HELD_BYTES` of sessions as they were posted. Past either, :meth:`mint` mints
    nothing until keys expire: unbounded, a loop of mints with megabyte sessions grew the server by a gigabyte.
    Expired keys are let go as they expire (a heap by expiry), so a mint costs the same however many are live.
    """

    api_key: str | None = field(repr=False)
    ids: IdFactory = field(repr=False)
    _minted: dict[str, tuple[float, dict[str, Any], int]] = field(default_factory=dict, repr=False)
    _expiry: list[tuple[float, str]] = field(default_factory=list, repr=False)
    _held: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        register_secret(self.api_key)

    def __repr__(self) -> str:
        key = "a key" if self.api_key else "no key"
        return f"<Credentials: {key}, {len(self._minted)} ephemeral>"

    def bearer(self, authorization: str | None) -> str | None:
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        return authorization[7:].strip() or None

    def is_api_key(self, token: str) -> bool:
        """The server's own key (whatever it looks like, ``ek_…`` included); without one, any
        token but an ``ek_…`` one, which is ephemeral or nothing."""
        if not _printable_ascii(token):  # a key is ASCII; anything else (e.g. non-UTF-8 bytes) is a wrong key
            return False
        if self.api_key is None:
            return not token.startswith("ek_")
        return hmac.compare_digest(token.encode(), self.api_key.encode())

    def session_for(self, token: str, now: float) -> dict[str, Any] | None:
        """The session config a live ephemeral key carries, or ``None``."""
        entry = self._minted.get(token)
        if entry is None or entry[0] <= now:
            return None
        return entry[1]

    def accepts(self, token: str | None, now: float) -> bool:
        """The server's key, or a live ephemeral key minted here."""
        if token is None:
            return False
        return self.is_api_key(token) or self.session_for(token, now) is not None

    def next_expiry(self, now: float) -> int:
        """Whole seconds, at least 1, until the next live key expires and frees its place and its bytes."""
        return max(1, math.ceil(self._expiry[0][0] - now)) if self._expiry else 1

    def mint(self, seconds: int, session: dict[str, Any], now: float, size: int = 0) -> tuple[str, int] | None:
        """A new ephemeral key carrying ``session`` (``size``: its bytes as posted) and when it expires; ``None`` while
        :data:`MAX_LIVE_KEYS` keys or :data:`MAX_HELD_BYTES` of sessions are live."""
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, gone = heapq.heappop(expiry)
            self._held -= self._minted.pop(gone)[2]
        if len(self._minted) >= MAX_LIVE_KEYS or self._held + size > MAX_HELD_BYTES:
            return None
        value = self.ids.secret("ek", 32)
        register_secret(value)
        expires_at = int(now + seconds)
        self._minted[value] = (float(expires_at), session, size)
        self._held += size
        heapq.heappush(expiry, (float(expires_at), value))
        return value, expires_at


class KeyOwners:
    """Which ephemeral key started each call or session: the API key acts on any of them, an ephemeral key on
    those it started alone (any other is answered as not found). The newest ``keep`` are remembered."""

    def __init__(self, credentials: Credentials, keep: int) -> None:
        self._credentials = credentials
        self._keep = keep
        self._owners: dict[str, str] = {}

    def own(self, item_id: str, token: str) -> None:
        """``token`` started ``item_id`` (an API key needs no record)."""
        if not self._credentials.is_api_key(token):
            self._owners[item_id] = token
            keep_newest(self._owners, self._keep)

    def forget(self, item_id: str) -> None:
        self._owners.pop(item_id, None)

    def may_act(self, token: str, item_id: str) -> bool:
        return self._credentials.is_api_key(token) or self._owners.get(item_id) == token


def _printable_ascii(token: str) -> bool:
    """Header values arrive decoded as Latin-1 or with surrogate escapes; a token is printable ASCII."""
    return token.isascii() and token.isprintable()


def mint_client_secret(
    request: HttpRequest, credentials: Credentials, default_model: str, wall_time: float
) -> HttpResponse:
    """``POST /v1/realtime/client_secrets``: a new ephemeral key with its session; ``wall_time`` is Unix seconds."""
    token = credentials.bearer(request.headers.get("authorization"))
    if token is None:
        return HttpResponse(401, error_body(errors.auth_missing()))
    if not credentials.is_api_key(token):  # an ephemeral key mints nothing
        return HttpResponse(401, error_body(errors.invalid_api_key()))
    try:
        body = parse_json(request.body or b"{}")
        if not isinstance(body, dict):
            raise RequestRejected(errors.not_an_object("a value of another type"))
        check_object(body, _SECRET_REQUEST)
        # not given: a Realtime session (a null was refused above); an empty one is checked as given, without a type
        session_raw = body["session"] if "session" in body else {"type": "realtime"}
        transcription = session_raw.get("type") == "transcription"  # a key for a transcription session
        config = SessionConfig(str(session_raw.get("model") or default_model), transcription=transcription)
        config.update(session_raw, voice_locked=False)
    except RequestRejected as exc:
        return HttpResponse(400, error_body(exc.spec))
    seconds = int(body.get("expires_after", {}).get("seconds", 600))
    minted = credentials.mint(seconds, session_raw, wall_time, len(request.body))
    if minted is None:
        wait = credentials.next_expiry(wall_time)
        return HttpResponse(429, error_body(errors.too_many_client_secrets(MAX_LIVE_KEYS, MAX_HELD_BYTES, wait)),
                            headers={"Retry-After": str(wait)})
    value, expires_at = minted
    session_id = credentials.ids.new("sess")
    session = config.view({"id": session_id, "object": config.object_name, "expires_at": 0})
    return HttpResponse(200, {"value": value, "expires_at": expires_at, "session": session})
