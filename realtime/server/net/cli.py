"""``voxline serve``: command-line arguments and the entry point of the local server."""

from __future__ import annotations

import argparse
import math
import os
import sys

from voxline.base.cli_numbers import number_option
from voxline.base.errors import VoxlineError
from voxline.base.shown import printable
from voxline.base.files import nonempty_path, stdout_reader_gone
from voxline.base.loop_runner import bounded_runner
from voxline.realtime.errors import ConfigurationError, UsageError
from voxline.realtime.server.engine.scenario import read_transcripts
from voxline.realtime.server.net.app import Server, serve
from voxline.realtime.server.net.call_slots import default_max_calls
from voxline.realtime.server.net.config import CLOSE_TIMEOUT_S, ServerConfig

__all__ = ["OPEN_NOTE", "add_serve_arguments", "config_from_args", "main_serve", "run_serve"]

API_KEY_ENV = "VOXLINE_SERVE_API_KEY"
OPEN_NOTE = (
    "voxline serve: no --api-key, so any token is accepted: every user and program on this machine "
    f"can use this server (loopback only); give --api-key KEY (or ${API_KEY_ENV}) to require one."
)
"""What ``serve`` says on stderr when it runs without a key."""


_MIN_SPEED = 0.01  # a hundredth of real time: a second of reply in 100 s
_MIN_MINUTES = 0.01  # 0.6 s: short enough to test an expiry, long enough to open a session


def _speed(text: str) -> float:
    if text == "instant":
        return math.inf
    return number_option(text, float, lambda v: v >= _MIN_SPEED,
                   f"'instant' or a multiple of real time of at least {_MIN_SPEED}")


_MAX_MINUTES = 7 * 24 * 60


def _minutes(text: str) -> float:
    return number_option(text, float, lambda v: math.isfinite(v) and _MIN_MINUTES <= v <= _MAX_MINUTES,
                   f"a finite number of minutes from {_MIN_MINUTES} up to {_MAX_MINUTES} (a week)")


_MAX_CLOSE_TIMEOUT_S = 600.0  # ten minutes for a client to take a close: a stopped --workers server waits twice it


def _close_timeout(text: str) -> float:
    return number_option(text, float, lambda v: 0 < v <= _MAX_CLOSE_TIMEOUT_S,
                   f"a number of seconds above 0 and up to {_MAX_CLOSE_TIMEOUT_S:g}")


def _max_calls(text: str) -> int:
    return number_option(text, int, lambda v: v >= 1, "a whole number of calls, at least 1")


def _port(text: str) -> int:
    return number_option(text, int, lambda v: 0 <= v <= 65535, "a port number 0..65535")


def _workers(text: str) -> int:
    from voxline.realtime.server.net.workers import MAX_WORKERS

    return number_option(text, int, lambda v: 1 <= v <= MAX_WORKERS, f"a number of processes 1..{MAX_WORKERS}")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``serve`` options to ``parser``."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --api-key)"
    )
    parser.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument(
        "--scenario", default=None, metavar="FILE", help="scenario TOML file or built-in name (default, long, tools, listen)"
    )
    parser.add_argument("--voice", default="auto", help="espeak, espeak:<variant>, tone, or auto (default)")
    parser.add_argument(
        "--transcripts",
        type=nonempty_path,
        default=None,
        metavar="FILE",
        help="what the user says, one line per user turn: streamed as scripted input transcripts "
        "(default: the scenario's user_says list, if any)",
    )
    parser.add_argument(
        "--hearing",
        choices=("auto", "on", "off"),
        default="auto",
        help="recognise what the user says when no transcript is scripted: on (needs voxline[asr]), off, "
        "or auto (default: on when voxline[asr] is installed); machine-made transcripts are approximate",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require this key (or an ephemeral key minted here); also read from ${API_KEY_ENV}",
    )
    parser.add_argument(
        "--speed",
        type=_speed,
        default=4.0,
        help="assistant audio pace as a multiple of real time (at least 0.01), or 'instant' (default 4)",
    )
    parser.add_argument(
        "--max-session-minutes",
        type=_minutes,
        default=60.0,
        help="session length limit, 0.01 to 10080; at it the server sends session_expired and closes (default 60)",
    )
    parser.add_argument(
        "--close-timeout",
        type=_close_timeout,
        default=CLOSE_TIMEOUT_S,
        metavar="S",
        help="seconds a close the server makes (its shutdown, a session's end) waits for the client to read the "
        f"last events and answer the close before the connection is dropped; above 0, up to "
        f"{_MAX_CLOSE_TIMEOUT_S:g} (default {CLOSE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--max-calls",
        type=_max_calls,
        default=None,
        metavar="N",
        help="WebRTC calls (Realtime and GPT-Live) one server process runs at once; an offer past them is answered "
        "HTTP 503 too_many_calls (default: half the process's file descriptor limit at 4 a call, at most 1024)",
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default=1,
        help="server processes sharing the port with SO_REUSEPORT, for more sessions than one core serves "
        "(default 1; ephemeral keys and WebRTC calls are per process)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """A :class:`ServerConfig` from parsed ``serve`` arguments (``ConfigurationError`` if invalid)."""
    return ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
        scenario=args.scenario,
        transcripts=None if getattr(args, "transcripts", None) is None else read_transcripts(args.transcripts),
        voice=args.voice,
        hearing=getattr(args, "hearing", "auto"),
        speed=args.speed,
        max_session_s=args.max_session_minutes * 60.0,
        close_timeout_s=getattr(args, "close_timeout", CLOSE_TIMEOUT_S),
        max_calls=getattr(args, "max_calls", None) or default_max_calls(),
    )


async def main_serve(args: argparse.Namespace) -> int:
    """Run the server until cancelled; return the exit status."""
    try:
        config = config_from_args(args)
        workers = getattr(args, "workers", 1)
        if workers > 1:
            from voxline.realtime.server.net.workers import supervise

            if config.api_key is None:
                print(OPEN_NOTE, file=sys.stderr, flush=True)
            return await supervise(args, config, workers)
        async with serve(config) as server:
            if config.api_key is None:  # before the banner, which tells a caller that the server is up
                print(OPEN_NOTE, file=sys.stderr, flush=True)
            print(banner(server), flush=True)
            await server.serve_forever()
    except UsageError as exc:  # exit statuses as every command's: 2 for a command line that cannot work as given
        print(f"voxline serve: error: {exc} (see voxline serve --help)", file=sys.stderr)
        return 2
    except ConfigurationError as exc:  # and 1 for the rest (a file's content, what this machine lacks)
        print(f"voxline serve: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # stdout's reader went away (`voxline serve | true`): not the listen's failure
        raise
    except OSError as exc:
        print(f"voxline serve: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def banner(server: Server) -> str:
    """The line that says the server is up, and what it is: what it hears, and how well."""
    return f"voxline local server at {server.url}/realtime — {described(server)}"


def described(server: Server) -> str:
    """What the server is, for its banner: ``a stand-in that …``, one worker's or many's alike."""
    scripted = len(server.scenario.user_says)
    if server.ears is None:
        hears = ("it does not understand speech: input transcripts are scripted "
                 f"({scripted} user turn(s) scripted, then transcription fails; voxline[asr] adds a recogniser)")
    else:
        hears = (f"input transcripts are scripted for {scripted} user turn(s), then machine-made by an offline "
                 f"recogniser ({server.ears.name}): approximate, not the service's")
    return (f"a stand-in that detects speech by energy and speaks scripted replies (scenario '{server.scenario.name}', voice '{server.voice}'); {hears}. "
            f"GPT-Live sessions at {server.url}/live/sessions.")


def run_serve(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the server (for a stand-alone entry point)."""
    parser = argparse.ArgumentParser(prog="voxline serve", description="Run the voxline local Realtime server.")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        with bounded_runner(None) as runner:
            return runner.run(main_serve(args))
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # nobody reads the banner: end quietly, as a writer to a closed pipe does
        stdout_reader_gone()
        return 1
    except VoxlineError as exc:  # a VOXLINE_EVENT_LOOP it cannot run on (main_serve says its own errors)
        print(f"voxline serve: error: {printable(str(exc))}", file=sys.stderr)
        return 1
