"""The ``voxline`` command line: ``serve``, ``talk``, ``replay``, ``devices``, ``token``.

User mistakes end with one line on stderr and a non-zero exit, never a traceback: 2 for a command
line that cannot work as given (argparse's convention), 1 for anything else. A mistyped option or
command is answered with the closest one there is.
"""

from __future__ import annotations

import argparse
import difflib
import re
import os
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

from voxline import __version__
from voxline.base.errors import VoxlineError
from voxline.base.redaction import redact, register_environment_secrets
from voxline.base.shown import printable
from voxline.base.files import descriptor_open, stdout_reader_gone
from voxline.base.log_output import log_to_stderr
from voxline.base.loop_runner import bounded_runner

from ..settings import UsageError

from . import commands
from .quiet import QuietWhenGone
from .option_values import may_be_value

__all__ = ["build_parser", "did_you_mean", "main"]


LOG_LEVELS = ("debug", "info", "warning", "error")


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are a single line, and which names unknown options first."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)  # an option is its whole name: no guessing at prefixes
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        # argparse quotes what it was given (unrecognized arguments, a bad choice): a key in a misplaced URL too
        self.exit(2, f"{self.prog}: error: {redact(message)} (see {self.prog} --help)\n")

    # one signature for argparse's overloads: this parser is only ever given its own namespace
    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        return super().parse_args(self._known(args), namespace)

    def parse_any_order(self, args: Sequence[str]) -> argparse.Namespace:
        """Parse a command's arguments with options and inputs in any order (``replay a.wav --fast b.wav``
        replays both, as most tools do); for a parser without subcommands."""
        return super().parse_intermixed_args(self._known(args))

    def _known(self, args: Sequence[str] | None) -> list[str]:
        """``args`` (default: the process's), once none is an option this parser does not know, with an option
        whose value may be left out given its default where the next word is not one of its values."""
        given = list(sys.argv[1:] if args is None else args)
        unknown = unknown_options(self, given)
        if unknown:
            self.error(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
                       + did_you_mean(unknown[0], self._option_string_actions))
        return self._values_left_out(self._dashed_values_joined(given))

    def _dashed_values_joined(self, given: list[str]) -> list[str]:
        """``--shard -1/4`` is ``--shard=-1/4``: argparse takes a word that starts with a dash and a digit but is no
        plain number for an option, and said "expected one argument" where the option's own check names the value."""
        out: list[str] = []
        skip = False
        for k, token in enumerate(given):
            if skip:
                skip = False
                continue
            if token == "--":
                return out + given[k:]
            action = self._option_string_actions.get(token)
            following = given[k + 1] if k + 1 < len(given) else None
            dashed = following is not None and re.fullmatch(r"-\d.*", following) is not None
            if (action is not None and action.nargs is None and action.option_strings and following is not None
                    and dashed and not self._negative_number_matcher.fullmatch(following)):
                out.append(f"{token}={following}")
                skip = True
                continue
            out.append(token)
        return out

    def _values_left_out(self, given: list[str]) -> list[str]:
        """``--aec a.wav`` is ``--aec=webrtc a.wav``: argparse would take the input as the option's value and
        refuse it as a bad choice (or, for ``--ray DIR``, as a cluster's address). Only for a command that takes
        inputs, and only for a word that names a file or a folder (or ``-``); any other word that is none of the
        option's values stays its value, to be refused as a mistyped one (``--aec spex``)."""
        if not any(not action.option_strings and action.nargs in ("*", "+") for action in self._actions):
            return given
        out: list[str] = []
        for k, token in enumerate(given):
            if token == "--":
                return out + given[k:]
            action = self._option_string_actions.get(token)
            following = given[k + 1] if k + 1 < len(given) else None
            if (action is not None and action.nargs == "?" and isinstance(action.const, str)
                    and following is not None and (following == "-" or not following.startswith("-"))
                    and not may_be_value(action, following) and _path_like(following)):
                token = f"{token}={action.const}"
            out.append(token)
        return out


def _path_like(word: str) -> bool:
    """A word that names a file or a folder (there, or by its shape), or ``-`` (stdin): an input, however close to
    one of an option's values it is (``--aec speech/``, ``--aec speex.wav``)."""
    return word == "-" or "/" in word or "." in word or os.path.exists(word)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean --fast?"`` for the choice closest to ``word``, or nothing if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def unknown_options(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """The options in ``args`` that ``parser`` does not take (values such as ``-5`` are not options)."""
    known = set(parser._option_string_actions)
    found = []
    for token in args:
        if token == "--":
            break
        if token.startswith("-") and token != "-" and not re.fullmatch(r"-\d.*", token):
            name = token.split("=", 1)[0] if token.startswith("--") else token[:2]  # -vv is -v twice
            if name not in known:
                found.append(name)
    return found


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """``-v`` / ``--log-level``, taken by every command."""
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log what voxline does to stderr (-v: info, -vv: debug)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None, type=str.lower,  # DEBUG as logging spells it
                        help="log level for the voxline.* loggers (default warning; info for serve)")


def configure_logging(args: argparse.Namespace) -> None:
    """Log records of ``voxline.*`` to stderr, one line each, at the level the flags ask for."""
    quiet = "info" if getattr(args, "command", None) == "serve" else "warning"  # serve logs its sessions
    level = args.log_level or ("debug" if args.verbose >= 2 else "info" if args.verbose == 1 else quiet)
    args.resolved_log_level = level  # for processes the command starts (serve's workers)
    log_to_stderr(level)


def _command_index(argv: list[str]) -> int:
    """Where the command's name is in ``argv`` (``len(argv)`` if there is none)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--log-level" else 1
    return min(i, len(argv))


def _standard_streams_open() -> None:
    """A standard descriptor the command was started without (``voxline … >&-``) is opened on the null device:
    else the next file the process opens takes its number, and what is meant for stdout is written into it."""
    for fd in (0, 1, 2):
        if not descriptor_open(fd):
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:  # a lower one was free after all: put it where it belongs
                os.dup2(opened, fd)
                os.close(opened)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="voxline", description="Realtime voice sessions with exact barge-in.")
    parser.add_argument("--version", action="version", version=f"voxline {__version__}")
    add_logging_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, (help_text, _module) in commands.COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text, add_help=False)
    return parser


def _full_parser(name: str) -> _Parser:
    """The parser with the arguments of subcommand ``name`` (its module is imported here)."""
    help_text = commands.COMMANDS[name][0]
    sub = _Parser(prog=f"voxline {name}", description=help_text)
    commands.load(name).add_arguments(sub)
    add_logging_arguments(sub)
    return sub


def main(argv: Sequence[str] | None = None) -> int:
    _standard_streams_open()
    stderr = sys.stderr
    if stderr is not None and not isinstance(stderr, QuietWhenGone):
        sys.stderr = QuietWhenGone(stderr)
    try:
        return _main(argv)
    finally:
        sys.stderr = stderr


def _main(argv: Sequence[str] | None) -> int:
    register_environment_secrets()
    argv = list(sys.argv[1:] if argv is None else argv)
    top = build_parser()
    # options before the command: --help, --version, -v/--log-level (kept for the command's parser)
    split = _command_index(argv)
    head, command_args = argv[:split], argv[split + 1 :]
    if split == len(argv):
        if head:
            top.parse_args(head)  # --help, --version, or an unknown option, named
        top.error(f"give a command: {', '.join(commands.COMMANDS)}")
    if argv[split] not in commands.COMMANDS:
        top.error(f"argument COMMAND: invalid choice: {argv[split]!r} (choose from {', '.join(commands.COMMANDS)})"
                  + did_you_mean(argv[split], commands.COMMANDS))
    first = top.parse_args(argv[: split + 1])
    args = _full_parser(first.command).parse_any_order([*head, *command_args])
    args.command = first.command
    configure_logging(args)
    module = commands.load(first.command)
    # a subcommand may ask for its own event loop (replay --fast: the lockstep loop on a virtual clock)
    factory = getattr(module, "loop_factory", lambda _args: None)(args)
    try:
        with bounded_runner(factory) as runner:
            code: int = runner.run(module.run(args))  # a command module's run(), loaded by name
            return code
    except KeyboardInterrupt:
        print("voxline: interrupted", file=sys.stderr)
        return 130
    except UsageError as exc:
        print(f"voxline {args.command}: error: {printable(str(exc))} (see voxline {args.command} --help)",
              file=sys.stderr)
        return 2
    except VoxlineError as exc:  # it may quote a server (a close reason, an HTTP body)
        print(f"voxline {args.command}: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (`voxline devices --json | head`): nothing to say to it
        stdout_reader_gone()
        return 1
    except OSError as exc:  # files the user named: unwritable output, a directory, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"voxline {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
