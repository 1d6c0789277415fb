"""The key a session's connection sends (the driver's side: the machine never sees it)."""

from __future__ import annotations

from voxline.base.errors import redact_url
from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.transports.http import split_userinfo
from voxline.realtime.transports.rtc_signaling import is_loopback_url

from .settings import SessionSettings

__all__ = ["LOCAL_KEY", "connection_key", "key_for", "placeholder_refused"]

LOCAL_KEY = "local"
"""What is sent to a server on this machine when no key was given (``voxline serve`` takes any token)."""


def key_for(url: str, key: str | None) -> str | None:
    """The one rule for the key sent to ``url``: ``key``; else the URL's own (``ws://user:KEY@host``); else, for a
    server on this machine (``voxline serve``, which takes any token), ``"local"``. None: there is none to send."""
    if key:
        return key
    if userinfo := split_userinfo(url)[1]:
        return userinfo
    return LOCAL_KEY if is_loopback_url(url) else None


def connection_key(settings: SessionSettings) -> str:
    """The key a session's connection sends (:func:`key_for` with ``api_key``), else one :class:`ConfigurationError`
    line."""
    key = key_for(settings.url, _given(settings))
    if key is None:
        raise ConfigurationError(f"no API key for {redact_url(settings.url)}: give the settings an api_key, or set "
                                 "OPENAI_API_KEY (a server on this machine, such as voxline serve's, needs none)")
    return key


def placeholder_refused(key: str, exc: ConnectionFailed) -> ConnectionFailed:
    """``exc`` said plainly when the server refused :data:`LOCAL_KEY`, sent for want of a key: the server wants one
    and none was given (rather than "the token was refused", of a token the user never gave)."""
    if exc.status not in (401, 403) or key != LOCAL_KEY:
        return exc
    return ConnectionFailed(f"no API key was given, and this server asks for one (set OPENAI_API_KEY or api_key): "
                            f"{exc.message}", exc.status)


def _given(settings: SessionSettings) -> str | None:
    return settings.api_key.get_secret_value() if settings.api_key is not None else None
