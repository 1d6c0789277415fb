"""The ``voxline`` console script and ``python -m voxline``.

The command line takes a moment to load (numpy, pydantic, the session); a Ctrl-C in that moment
is the same one line and exit status 130 as a Ctrl-C later, not a traceback from inside an import.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    try:
        from voxline.session.cli import main as run

        return run()
    except KeyboardInterrupt:
        print("voxline: interrupted", file=sys.stderr)
        return 130
