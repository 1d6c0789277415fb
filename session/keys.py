"""The key a session's connection sends (the driver's side: the machine never sees it)."""

from __future__ import annotations

from voxline.base.redaction import redact_url
from voxline.base.urls import LOCAL_KEY, is_loopback_url
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.transports.http import split_userinfo

from .settings import SessionSettings, key_text

__all__ = ["connection_key", "key_for"]


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


def _given(settings: SessionSettings) -> str | None:
    return key_text(settings.api_key)
