"""What a service URL must be, and whether a host is this machine: plain functions, no I/O.

A server on this machine is sent :data:`LOCAL_KEY` when no key was given. The command line (``--url``,
``$VOXLINE_URL``) and :class:`~voxline.session.settings.SessionSettings` check a URL
with :func:`url_problem`; the local server, the command line and WebRTC signalling ask :func:`is_loopback` (of a URL:
:func:`is_loopback_url`).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

from .redaction import redact_url, register_url_secrets

__all__ = ["LOCAL_KEY", "SCHEMES", "is_loopback", "is_loopback_url", "url_problem"]

LOCAL_KEY = "local"
"""The token sent to a server on this machine when no key was given (``voxline serve`` without ``--api-key`` takes
any): a refusal of it means the server asks for a key, not that a key was wrong."""

SCHEMES = ("ws", "wss", "http", "https")
"""The schemes a Realtime or GPT-Live URL may have (http(s) becomes ws(s) for a WebSocket)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``, bracketed or not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """Does ``url`` point at this machine (:func:`is_loopback` of its host)?"""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:  # an unclosed [IPv6 address
        return False
    return is_loopback(host)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a service's URL (a scheme of :data:`SCHEMES` and a host), as a phrase that follows
    "is" and names the URL only redacted; None if it can."""
    register_url_secrets(url)
    if any(c.isspace() or not c.isprintable() for c in url):  # a parser drops a trailing line break; the dial did not
        return "not a valid URL: it holds a space, a line break or another control character"
    authority = url.split("//", 1)[1].split("/", 1)[0] if "//" in url else ""
    if re.search(r"[?#][^@]*@", authority):  # a parser ends the authority at the mark: the key would be the host
        return ("not a valid URL: a '?' or '#' before an '@' in its authority (a key holding one must be written "
                "%3F or %23)")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6 address
        return f"not a valid URL: {exc}"
    try:
        _ = parts.port  # a port that is no number, or out of range, raises here
    except ValueError:  # its message quotes the port, which may be a key holding a '/' cut short
        return "not a valid URL: its port is not a number from 0 to 65535"
    if parts.scheme in SCHEMES and parts.hostname:
        return None
    typo = re.match(r"(?i)(wss?|https?):(/*)", url)
    if typo is not None and typo.group(2) != "//":  # wss:/host, wss:///host
        return (f"a URL whose scheme is not followed by '//'; did you mean "
                f"{redact_url(typo.group(1).lower() + '://' + url[typo.end():])}?")
    if "://" not in url:
        rest = url.removeprefix("//")  # a scheme-relative URL: only the scheme is missing
        host = urllib.parse.urlsplit(f"//{rest}").hostname or ""
        scheme = "ws" if is_loopback(host) else "wss"
        return f"a URL without a scheme; did you mean {redact_url(f'{scheme}://{rest}')}?"
    return "not a Realtime URL: give ws://, wss://, http:// or https:// and a host"
