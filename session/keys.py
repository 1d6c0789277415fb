"""The key a session's connection sends (the driver's side: the machine never sees it)."""

from __future__ import annotations

from voxline.base.errors import redact_url
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.transports.http import split_userinfo
from voxline.realtime.transports.rtc_signaling import is_loopback_url

from .settings import SessionSettings

__all__ = ["connection_key"]


def connection_key(settings: SessionSettings) -> str:
    """The key a connection sends: ``api_key``; else the URL's own (``ws://user:KEY@host``, passed on as ``""``);
    else, for a server on this machine (``voxline serve``, which takes any token), ``"local"``, as the command line
    does. Else one :class:`ConfigurationError` line."""
    if settings.api_key is not None:
        return settings.api_key.get_secret_value()
    if split_userinfo(settings.url)[1]:
        return ""
    if is_loopback_url(settings.url):
        return "local"
    raise ConfigurationError(f"no API key for {redact_url(settings.url)}: pass api_key= or set OPENAI_API_KEY "
                             "(a server on this machine, such as voxline serve's, needs none)")
