"""``voxline token``: mint an ephemeral client secret (``POST /v1/realtime/client_secrets``).

Ephemeral secrets are for browsers and kiosks; the API key stays on the machine that mints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import urllib.error
import urllib.request
from typing import Any

from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.transports.failures import connect_failure, http_status

__all__ = ["add_arguments", "mint_client_secret", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("VOXLINE_URL") or os.environ.get("OPENAI_BASE_URL")
                        or "https://api.openai.com/v1",
                        help="API base URL (default: $VOXLINE_URL, $OPENAI_BASE_URL or https://api.openai.com/v1)")
    parser.add_argument("--model", default=os.environ.get("VOXLINE_MODEL") or "gpt-realtime",
                        help="the model the secret's session is for (default $VOXLINE_MODEL, else gpt-realtime)")
    parser.add_argument("--ttl", type=int, default=600, help="seconds the secret stays valid (10..7200)")


def mint_client_secret(base_url: str, api_key: str, *, model: str, ttl: int) -> dict[str, Any]:
    """Blocking HTTP call; returns the server's JSON (``value``, ``expires_at``, ``session``)."""
    if not 10 <= ttl <= 7200:
        raise ConfigurationError(f"--ttl must be between 10 and 7200 seconds, not {ttl}")
    body = {"expires_after": {"anchor": "created_at", "seconds": ttl}, "session": {"type": "realtime", "model": model}}
    request = urllib.request.Request(
        base_url.rstrip("/") + "/realtime/client_secrets",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raise ConnectionFailed(f"client secret refused: {http_status(request.full_url, exc.code)}") from None
    except urllib.error.URLError as exc:
        cause = exc.reason if isinstance(exc.reason, BaseException) else exc
        raise ConnectionFailed(connect_failure(request.full_url, cause)) from None
    except OSError as exc:
        raise ConnectionFailed(connect_failure(request.full_url, exc)) from None


async def run(args: argparse.Namespace) -> int:
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise ConfigurationError("OPENAI_API_KEY is not set; a client secret is minted with an API key")
    secret = await asyncio.to_thread(mint_client_secret, args.url, api_key, model=args.model, ttl=args.ttl)
    print(json.dumps({"value": secret.get("value"), "expires_at": secret.get("expires_at")}))
    return 0
