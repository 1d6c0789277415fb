"""Cross-origin HTTP, as the service answers it: browser pages may call the REST endpoints directly.

A browser kiosk served from its own origin posts its SDP offer to ``/v1/realtime/calls`` with an
ephemeral key, which makes the browser send a preflight first (``OPTIONS`` with
``Access-Control-Request-Method`` / ``-Headers``: the request carries ``Authorization`` and an
``application/sdp`` body). The service allows any origin (credentials are bearer tokens, never
cookies), and lets the page read the ``Location`` header, which names the call for the backend's
sideband. So every HTTP answer carries the allow-origin and expose-headers lines, and a preflight
on any path gets ``204`` with the methods and the headers it asked for.
"""

from __future__ import annotations

import dataclasses
import re

from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse

__all__ = ["is_preflight", "preflight", "with_cors"]

_ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
_EXPOSE = "Location"
_MAX_AGE_S = 600
_TOKEN_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")


def is_preflight(request: HttpRequest) -> bool:
    """An ``OPTIONS`` request a browser sends before a cross-origin call."""
    return request.method == "OPTIONS"


def preflight(request: HttpRequest) -> HttpResponse:
    """``204``: any origin, the methods, and the request headers the browser asked for (when well formed)."""
    asked = request.headers.get("access-control-request-headers", "").strip()
    headers = {
        "Access-Control-Allow-Methods": _ALLOW_METHODS,
        "Access-Control-Max-Age": str(_MAX_AGE_S),
    }
    if asked and _TOKEN_LIST.fullmatch(asked):  # echoed only as a list of header names: nothing else gets through
        headers["Access-Control-Allow-Headers"] = asked
    return with_cors(HttpResponse(204, b"", content_type="text/plain", headers=headers))


def with_cors(response: HttpResponse) -> HttpResponse:
    """``response`` readable from any origin, its ``Location`` header included."""
    headers = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": _EXPOSE, **response.headers}
    return dataclasses.replace(response, headers=headers)
