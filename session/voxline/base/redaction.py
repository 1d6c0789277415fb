"""Redaction: keys and tokens never reach a message, a log, a report or a repr.

Keys are recognised two ways: by their shape (the value after ``Bearer`` or after a credential-looking
name, a URL's userinfo, a secret-looking query value, the service's own key prefixes) and verbatim, once
registered as in use (:func:`register_secret`; transports register the token they send, the local server
its key and the ephemeral keys it mints). :func:`redact` replaces both by ``[redacted]``; every
:class:`~voxline.base.errors.VoxlineError` message goes through it. Log records pass through
:class:`RedactingFilter`, installed on the loggers that may see a key by :func:`install_log_redaction`. A
URL is printed or written only through :func:`redact_url` (userinfo and secret-looking query values
removed), and the secrets in a URL a user gives are registered by :func:`register_url_secrets`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

__all__ = [
    "LOGGERS",
    "RedactingFilter",
    "forget_secret",
    "install_log_redaction",
    "longest_secret",
    "redact",
    "redact_log_arguments_whole",
    "redact_url",
    "redacted",
    "register_environment_secrets",
    "register_secret",
    "register_url_secrets",
    "scrub",
    "url_secrets",
]

# Secrets recognised by their shape, whatever the key itself looks like: the value after
# ``Bearer`` or after a credential-looking name (``Authorization: …``, ``api_key=…``,
# ``"client_secret": "…"``), the browser subprotocol that carries a key, the service's
# own key prefixes, and a key the service masked in the middle when it echoes one it refused
# (``sk-proj-****…abcd``, ``abc****…wxyz``): the ends it leaves are part of the key too.
_SHAPES = re.compile(
    r"""(?x)
    \b(?:Bearer|BEARER|bearer(?=\s+[A-Za-z0-9._~+/=-]*[0-9_.~+/=-]))\s+(?!\[redacted\])[^\s"',;]+
  | \bBasic\s+[A-Za-z0-9+/]{8,}={0,2}
  | (?i:\b(?:authorization|x-api-key|api[-_]?key|access[-_]?token|client[-_]?secret|secret[-_]?key|password)
      ["']?\s*[:=]\s*["']?(?:(?:bearer|basic)\s+)?(?!\[redacted\]|(?:bearer|basic)\s)[^\s"',;&]+)
  | (?<=://)[^\s/?#@"']+(?=@)
  | (?P<param>(?i:(?<=[?&;])[A-Za-z0-9_.~%-]*(?:key|token|secret|pass|pwd|auth|sig|credential|bearer|jwt)[A-Za-z0-9_.~%-]*=)
      (?!\[redacted\])[^\s&#"',;]+)
  | openai-insecure-api-key\.[^\s"',;]+
  | \b(?:sk|rk)-[A-Za-z0-9_\-*]{4,}
  | \bek_[A-Za-z0-9_\-*]{4,}
  | \b[A-Za-z0-9_\-]{2,}\*{4,}[A-Za-z0-9_\-]{2,}
    """
)
_BY_SHAPE = re.compile(r"(?:sk|rk)-[A-Za-z0-9_\-]{4,}|ek_[A-Za-z0-9_\-]{4,}")
"""Keys :data:`_SHAPES` redacts whole by their prefix, wherever they are."""
_MIN_SECRET = 8
"""Shorter values are not registered: redacting every ``k`` or ``local`` would garble messages."""
_MAX_SECRETS = 64

_lock = threading.Lock()
_known: dict[str, None] = {}
_literal: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Remember a key or token in use, so :func:`redact` removes it verbatim, whatever its prefix.

    Transports register the token they send; the local server registers its key and the
    ephemeral keys it mints. Values shorter than 8 characters are ignored, and so are keys whose
    shape gives them away anyway (``sk-…``, ``ek_…``); of the rest, the 64 most recently registered
    (or registered again: a transport does at each connect) are kept.
    """
    global _literal
    if not value or len(value) < _MIN_SECRET or _BY_SHAPE.fullmatch(value):
        return  # a key the shapes catch anyway takes no place among the remembered ones
    with _lock:
        if value in _known:  # used again: the last to be forgotten
            del _known[value]
            _known[value] = None
            return
        _known[value] = None
        while len(_known) > _MAX_SECRETS:
            del _known[next(iter(_known))]
        _literal = _compile(_known)


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ``[redacted]``, e.g. a token a server echoed back.

    Like :func:`register_secret`, values shorter than 8 characters are left alone: a token such
    as ``local`` (what a loopback server takes) is a word, and words in transcripts must survive.
    ``text`` may be JSON that spells the secret's characters as ``\\u00XX`` escapes (which
    parse back to the secret): printable ASCII so escaped is written plainly first, quotes and
    backslashes excepted, so the JSON stays valid and means what it meant.
    """
    if not secret or len(secret) < _MIN_SECRET:
        return text
    if secret not in text:
        if "\\u00" not in text:  # no escape of ASCII at all: the common case, one scan
            return text
        plain = _ASCII_ESCAPE.sub(_plain_ascii, text)
        if secret not in plain:
            return text
        text = plain
    return text.replace(secret, "[redacted]")


_ASCII_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([2-7][0-9a-fA-F])")
"""A ``\\u00XX`` escape of printable ASCII that is not itself an escaped backslash's text."""


def _plain_ascii(match: re.Match[str]) -> str:
    character = chr(int(match.group(2), 16))
    return match.group(0) if character in '"\\' else match.group(1) + character


def longest_secret() -> int:
    """The length of the longest value redacted verbatim (0 while none is): how far before a cut in a text a secret
    may begin that the cut leaves unrecognised."""
    with _lock:
        return max(map(len, _known), default=0)


def forget_secret(value: str) -> None:
    """Stop redacting ``value`` verbatim (tests; a key that was rotated out)."""
    global _literal
    with _lock:
        if _known.pop(value, 0) is None:
            _literal = _compile(_known)


def _compile(values: dict[str, None]) -> re.Pattern[str] | None:
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


def redact(text: str) -> str:
    """Replace anything that looks like a key or token, and every registered secret, by ``[redacted]``."""
    literal = _literal
    if literal is not None:
        text = literal.sub("[redacted]", text)
    return _SHAPES.sub(_keep_name, text)


def redacted(value: Any) -> Any:
    """``value`` (parsed JSON) with every string in it, keys included, through :func:`redact`."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def _keep_name(match: re.Match[str]) -> str:
    """``Authorization: [redacted]`` rather than ``[redacted]``: the name says what was there."""
    found = match.group(0)
    if match.group("param") is not None:
        return found[: found.index("=") + 1] + "[redacted]"  # ``?key=[redacted]``
    name = re.match(r"(?i)(?:bearer|basic)\s+|[A-Za-z_-]+[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic)\s+)?", found)
    if name is None or found.lower().startswith(("sk-", "rk-", "ek_", "openai-insecure")):
        return "[redacted]"
    return found[: name.end()] + "[redacted]"


_SECRET_PARAM = re.compile(r"(?i)key|token|secret|pass|pwd|auth|sig|credential|bearer|jwt")
"""A query parameter whose name contains one of these carries a secret: ``api-key``, ``key``,
``access_token``, ``X-Amz-Signature``, ``auth``, ``bearer``, ``jwt``…"""


def _pairs(query: str) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of a query, decoded, split at ``&`` and at ``;`` (which some servers take as
    ``&`` and :func:`urllib.parse.parse_qsl` does not)."""
    pairs = []
    for piece in re.split(r"[&;]", query):
        name, _, value = piece.partition("=")
        if value:
            pairs.append((urllib.parse.unquote_plus(name), urllib.parse.unquote_plus(value)))
    return pairs


_SCHEME_AND_SLASHES = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?/*")


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``url`` as (its scheme and slashes, its userinfo, the rest from the ``@`` on), or ``None`` without one.

    A URL a parser reads whole (an authority with a host, and a port if any that is a number) has the userinfo
    the parser finds, and an ``@`` in its path or query is nobody's. Where the parser finds no authority or a
    broken one (a scheme typed with one slash or three, none at all as in ``key@host``, a key holding ``/``
    that ends the authority early and leaves part of the key as its port), the userinfo is what comes before the
    last ``@`` before the query or fragment. Either way, a key holding ``?`` or ``#`` ends the authority there
    for a parser, and its ``@`` comes after: an ``@`` after a ``?`` or ``#`` but before any ``/`` ends a
    userinfo (:func:`~voxline.base.urls.url_problem` refuses such a URL)."""
    try:
        parts = urllib.parse.urlsplit(url)
        whole = bool(parts.hostname) and (parts.port is not None or not _PORT_GIVEN.search(parts.netloc))
    except ValueError:
        parts, whole = None, False
    if whole and parts is not None:
        if "@" not in parts.netloc:
            return _split_at(url, _key_with_query_mark(url))
        start = url.index(parts.netloc)
        at = start + parts.netloc.rindex("@")
        return url[:start], url[start:at], url[at:]
    head = re.split(r"[?#]", url, maxsplit=1)[0]
    at = head.rfind("@")
    return _split_at(url, at if at >= 0 else _key_with_query_mark(url))


def _split_at(url: str, at: int) -> tuple[str, str, str] | None:
    """(scheme and slashes, userinfo, the rest) with the userinfo ending at ``at``; None if no userinfo does."""
    prefix = _SCHEME_AND_SLASHES.match(url)
    if at < 0 or prefix is None or prefix.end() > at:
        return None
    return url[: prefix.end()], url[prefix.end(): at], url[at:]


def _key_with_query_mark(url: str) -> int:
    """Where the userinfo of a key holding ``?`` or ``#`` ends: the last ``@`` before the first ``/`` after the
    scheme's slashes, if a ``?`` or ``#`` comes before it; else -1."""
    prefix = _SCHEME_AND_SLASHES.match(url)
    begin = prefix.end() if prefix is not None else 0
    slash = url.find("/", begin)
    region = url[begin: slash if slash >= 0 else len(url)]
    at = region.rfind("@")
    if at < 0 or not re.search(r"[?#]", region[:at]):
        return -1
    return begin + at


_PORT_GIVEN = re.compile(r":[^\]@:]*$")
"""An authority that ends in ``:something`` (outside an IPv6 address's brackets) gives a port."""


def url_secrets(url: str) -> list[str]:
    """The secrets ``url`` carries: the userinfo's password (or its user alone) and the values of
    secret-looking query parameters (a URL with no scheme is read as if it had one)."""
    found: list[str] = []
    userinfo = _userinfo(url)
    if userinfo is not None:
        user, _, password = userinfo[1].partition(":")
        found += [urllib.parse.unquote(password or user), password or user]
        url = userinfo[0] + userinfo[2][1:]  # the rest read without it
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return [value for value in found if value]
    for name, value in _pairs(parts.fragment):  # never sent, but printed
        if _SECRET_PARAM.search(name):
            found += [value, urllib.parse.quote(value, safe="")]
    for name, value in _pairs(parts.query):
        if _SECRET_PARAM.search(name):
            found += [value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value), *value.split()[-1:]]
    return [value for value in dict.fromkeys(found) if value]


def register_url_secrets(url: str | None) -> None:
    """:func:`register_secret` every secret ``url`` carries (:func:`url_secrets`), so that
    :func:`redact` removes it wherever it turns up, even outside the URL."""
    for value in url_secrets(url or ""):
        register_secret(value)


def register_environment_secrets() -> None:
    """The keys the environment holds, redacted wherever they turn up, used or not (the command at its start, each
    farm worker at its own): with ``--local`` an ``OPENAI_API_KEY`` goes unused, and one not shaped like ``sk-…``
    (an Azure key) that a tool's error quoted went to the event log as it was."""
    for name in ("OPENAI_API_KEY", "VOXLINE_API_KEY"):
        register_secret(os.environ.get(name, "").strip() or None)
    for name in ("VOXLINE_URL", "OPENAI_BASE_URL"):
        register_url_secrets(os.environ.get(name))


def redact_url(url: str) -> str:
    """``url`` fit to print or write: its userinfo is ``[redacted]``, and so is the value of each
    secret-looking query parameter (``?api-key=``, ``?key=``, ``?token=``…); then :func:`redact`.

    ``wss://user:sk-…@host/v1?api-key=K&model=m`` → ``wss://[redacted]@host/v1?api-key=[redacted]&model=m``.
    A fragment (``#…``, which no request carries) is ``[redacted]`` whole. A URL with no scheme
    (``KEY@host/v1``) is read as if it had one, so its userinfo is found all the same.
    """
    userinfo = _userinfo(url)
    if userinfo is not None:  # found wherever it is (KEY@host:port/… parses as a path), and held by a placeholder
        url = userinfo[0] + _USERINFO + userinfo[2]  # a URL parser takes (brackets are an IPv6 address's)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url.replace(_USERINFO, "[redacted]"))
    query = "".join(_redact_param(piece) for piece in re.split(r"([&;])", parts.query))
    fragment = "[redacted]" if parts.fragment else ""  # never sent; whatever it holds is the user's
    shown = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, query, fragment))
    return redact(shown.replace(_USERINFO, "[redacted]"))


_USERINFO = "voxline-userinfo-redacted"


def _redact_param(pair: str) -> str:
    name, equals, value = pair.partition("=")
    if equals and value and _SECRET_PARAM.search(urllib.parse.unquote_plus(name)):
        return f"{name}=[redacted]"
    return pair


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from a record's message, arguments and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _WHOLE_FIRST and isinstance(record.args, tuple):  # before a library's own str() cuts them
            args = record.args
            for whole in _WHOLE_FIRST:
                args = tuple(whole(arg) for arg in args)
            record.args = args
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: let the handler report it as logging does
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_WHOLE_FIRST: list[Callable[[object], object]] = []


def redact_log_arguments_whole(redactor: Callable[[object], object]) -> None:
    """Have :class:`RedactingFilter` hand each argument of a record to ``redactor`` before the message is made:
    for a library's object that prints only an excerpt of its payload (websockets' frames: the first 48 and the
    last 24 characters), which once cut no longer shows a key whole for :func:`redact` to find. ``redactor``
    returns the argument with its payload redacted whole (or the argument itself); idempotent."""
    if redactor not in _WHOLE_FIRST:
        _WHOLE_FIRST.append(redactor)


LOGGERS = (
    "voxline",
    "voxline.server",
    "websockets",
    "websockets.client",
    "websockets.server",
    "aiortc",
    "aioice",
)
"""Loggers that may see a key: ours, and the libraries that log handshakes and frames at DEBUG."""

_FILTER = RedactingFilter()


def install_log_redaction(*names: str) -> None:
    """Attach the one :class:`RedactingFilter` to ``names`` (default :data:`LOGGERS`) and to every
    logger below them that exists already; idempotent.

    A filter on a logger sees only the records created on that logger, not those of its
    children, so each logger that may carry a key gets it: websockets logs every handshake
    header (``Authorization`` included) and frame excerpts at DEBUG on ``websockets.client``
    and ``websockets.server``; aiortc and aioice log on one logger per module. Modules that
    import such a library call this again afterwards, so its module loggers are covered.
    """
    wanted = names or LOGGERS
    below = tuple(f"{w}." for w in wanted)
    existing = [name for name in list(logging.Logger.manager.loggerDict) if name.startswith(below)]
    for name in (*wanted, *existing):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
