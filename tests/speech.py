"""Kept for ``benchmarks/``, which imports this path: the module is :mod:`tests.support.speech`."""

from tests.support.speech import *  # noqa: F403
from tests.support.speech import __all__  # noqa: F401
