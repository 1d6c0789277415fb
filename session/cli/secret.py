"""``voxline token``: mint an ephemeral client secret (``POST /v1/realtime/client_secrets``).

Ephemeral secrets are for browsers and kiosks; the API key stays on the machine that mints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import urllib.parse
from typing import Any

from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.base.redaction import redact_url, register_url_secrets
from voxline.base.urls import LOCAL_KEY
from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.transports.http import check_http_url, post
from voxline.realtime.transports.failures import error_detail, http_status

from ..keys import key_for
from ..settings import UsageError, api_key_from_env, env

__all__ = ["add_arguments", "api_base", "mint_client_secret", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("VOXLINE_URL") or os.environ.get("OPENAI_BASE_URL")
                        or "https://api.openai.com/v1",
                        help="API base URL (default: $VOXLINE_URL, $OPENAI_BASE_URL or https://api.openai.com/v1)")
    parser.add_argument("--model", default=env("VOXLINE_MODEL") or DEFAULT_REALTIME_MODEL,
                        help=f"the model the secret's session is for (default $VOXLINE_MODEL, else {DEFAULT_REALTIME_MODEL})")
    parser.add_argument("--ttl", type=int, default=600, help="seconds the secret stays valid (10..7200)")


def mint_client_secret(base_url: str, api_key: str, *, model: str, ttl: int, keyless: bool = False) -> dict[str, Any]:
    """Blocking HTTP call; returns the server's JSON (``value``, ``expires_at``, ``session``).

    No redirect is followed (:mod:`voxline.realtime.transports.http`): the API key goes to the
    host named by ``base_url`` and nowhere else. ``keyless``: no key was configured (a loopback
    server is asked with a stand-in), so a refusal says that none was given.
    """
    _check_ttl(ttl)
    _check_url(base_url)
    body = {"expires_after": {"anchor": "created_at", "seconds": ttl}, "session": {"type": "realtime", "model": model}}
    parts = urllib.parse.urlsplit(base_url)  # check_http_url parsed it already
    target = urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/realtime/client_secrets"))
    reply = post(target, api_key, json.dumps(body).encode(), "application/json", timeout=15)
    url = redact_url(target)
    if reply.redirected:
        raise ConnectionFailed(f"{url} answered with a redirect (HTTP {reply.status}); not followed with the API key")
    if keyless and reply.status in (401, 403):
        raise ConnectionFailed(f"client secret refused: HTTP {reply.status} from {url}: this server asks for an API key, "
                               "and neither VOXLINE_API_KEY nor OPENAI_API_KEY is set")
    if reply.status >= 400:  # the status read off the URL as given (a redacted one no longer parses), then redacted
        said = http_status(target, reply.status).replace(target, url)
        raise ConnectionFailed(f"client secret refused: {said}{error_detail(reply.body)}")
    try:
        secret = json.loads(reply.body)
    except ValueError:
        secret = None
    if not isinstance(secret, dict) or not isinstance(secret.get("value"), str):
        raise ConnectionFailed(f"{url} answered HTTP {reply.status} without a client secret")
    return secret


def _check_ttl(ttl: int) -> None:
    if not 10 <= ttl <= 7200:
        raise UsageError(f"--ttl must be between 10 and 7200 seconds, not {ttl}")


def _check_url(url: str) -> None:
    """A URL that cannot be minted at is a usage error (exit 2); its secrets are registered first."""
    register_url_secrets(url)
    try:
        check_http_url(url, "--url", named="an http(s):// or ws(s):// URL")  # serve prints a ws:// one
    except ConfigurationError as exc:  # a flag's value: a usage error (exit 2)
        raise UsageError(str(exc)) from None


def api_base(url: str) -> str:
    """The HTTP API base for ``url``: the ``ws(s)://…/v1/realtime`` that ``voxline serve`` prints becomes
    ``http(s)://…/v1``; anything else is left for :func:`check_http_url` to judge."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not a URL at all: check_http_url says so in one line
        return url
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/realtime") if scheme != parts.scheme or path.endswith("/v1/realtime") else path
    return urllib.parse.urlunsplit(parts._replace(scheme=scheme, path=path))


async def run(args: argparse.Namespace) -> int:
    _check_ttl(args.ttl)  # a flag's mistake is said first, whatever else is missing
    if not args.model.strip():  # else the server's own refusal, which names another mistake
        raise UsageError(f"--model={args.model!r}: names no model: give a model's name, or leave it out for the default")
    url = api_base(args.url)
    _check_url(url)  # the flag's own mistake before what the environment lacks
    api_key = key_for(url, api_key_from_env())  # the configured key, the URL's, or the placeholder on loopback
    keyless = api_key == LOCAL_KEY  # a local server without --api-key takes any key (one with a key refuses this one)
    if not api_key:
        raise ConfigurationError("neither VOXLINE_API_KEY nor OPENAI_API_KEY is set; a client secret is minted with an API key")
    secret = await asyncio.to_thread(mint_client_secret, url, api_key, model=args.model, ttl=args.ttl, keyless=keyless)
    print(json.dumps({"value": secret.get("value"), "expires_at": secret.get("expires_at")}))
    return 0
