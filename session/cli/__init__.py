"""The ``voxline`` command line: ``serve``, ``talk``, ``replay``, ``devices``, ``token``.

User mistakes end with one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from voxline import __version__
from voxline.base.errors import VoxlineError

from . import commands

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are a single line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="voxline", description="Realtime voice sessions with exact barge-in.")
    parser.add_argument("--version", action="version", version=f"voxline {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, (help_text, _module) in commands.COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text, add_help=False)
    return parser


def _full_parser(name: str) -> argparse.ArgumentParser:
    """The parser with the arguments of subcommand ``name`` (its module is imported here)."""
    help_text = commands.COMMANDS[name][0]
    sub = _Parser(prog=f"voxline {name}", description=help_text)
    commands.load(name).add_arguments(sub)
    return sub


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = build_parser()
    first, rest = top.parse_known_args(argv[:1])
    if first.command is None:
        top.print_help()
        return 2
    args = _full_parser(first.command).parse_args(argv[1:])
    args.command = first.command
    module = commands.load(first.command)
    # a subcommand may ask for its own event loop (replay --fast: the lockstep loop on a virtual clock)
    factory = getattr(module, "loop_factory", lambda _args: None)(args)
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(module.run(args))
    except KeyboardInterrupt:
        print("voxline: interrupted", file=sys.stderr)
        return 130
    except VoxlineError as exc:
        print(f"voxline {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # files the user named: unwritable output, a directory, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"voxline {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
