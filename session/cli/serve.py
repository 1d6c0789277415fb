"""``voxline serve``: the built-in local Realtime server (see :mod:`voxline.realtime.server`)."""

from voxline.realtime.server.net.cli import add_serve_arguments as add_arguments
from voxline.realtime.server.net.cli import main_serve as run

__all__ = ["add_arguments", "run"]
