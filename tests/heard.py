"""Kept for ``benchmarks/``, which imports this path: the module is :mod:`tests.support.heard`."""

from tests.support.heard import *  # noqa: F403
from tests.support.heard import __all__  # noqa: F401
