"""Where a command that can reach the service connects: ``--url``, ``$VOXLINE_URL`` or the built-in server.

One rule for every such command (``talk``, ``replay``): ``--local`` runs against the built-in
server whatever the environment says; an empty variable (or one of spaces) is unset; a URL without a scheme is
named as such before anything starts.
"""

from __future__ import annotations

import argparse

from voxline.base.redaction import redact_url
from voxline.realtime.errors import ConfigurationError
from voxline.base.urls import url_problem

from ..settings import UsageError, env

__all__ = ["add_local_argument", "check_url", "conflict", "target_url"]

def add_local_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", action="store_true",
                        help="run against the built-in local server, whatever OPENAI_API_KEY or VOXLINE_URL say")


def check_url(url: str, what: str = "--url") -> str:
    """``url`` if it names a scheme and a host; else one line saying what it lacks, with the URL it may mean
    (:func:`~voxline.base.urls.url_problem`; the URL's secrets are registered for redaction first,
    and the line names it only redacted)."""
    problem = url_problem(url)
    if problem is None:
        return url
    error = UsageError if what.startswith("--") else ConfigurationError
    raise error(f"{what} {redact_url(url)} is {problem}")


def target_url(args: argparse.Namespace) -> str | None:
    """``--url``, else ``$VOXLINE_URL``; None means the built-in server (always with ``--local``).

    It is printed and written only through :func:`~voxline.base.redaction.redact_url`.
    """
    if getattr(args, "local", False):
        if args.url:
            raise UsageError("--local runs against the built-in server; drop --url or --local")
        return None
    if args.url:
        return check_url(args.url)
    given = env("VOXLINE_URL")
    return check_url(given, "VOXLINE_URL") if given else None


def conflict(args: argparse.Namespace) -> type[ConfigurationError]:
    """The error for a flag that cannot go with the server :func:`target_url` chose: a usage error (exit 2)
    when ``--url`` named it, a configuration error (exit 1) when the environment did."""
    return UsageError if args.url else ConfigurationError


def built_in_only(args: argparse.Namespace) -> None:
    """Refuse ``--fast``, ``--scenario`` and ``--voice`` with the server :func:`target_url` chose,
    naming what chose it (``--url``, or ``VOXLINE_URL`` in the environment)."""
    error = conflict(args)
    if args.url:
        named, fix = "--url names a server", "drop --url"
    else:
        named, fix = "VOXLINE_URL names a server", "add --local (it ignores VOXLINE_URL)"
    if args.fast:
        raise error(f"--fast runs against the built-in server only, and {named}; {fix} or drop --fast")
    if args.scenario is not None or args.voice != "auto":
        raise error(f"--scenario and --voice apply to the built-in server only, and {named}; {fix}")
