"""Kept for ``benchmarks/``, which imports this path: the module is :mod:`tests.support.virtual_devices`."""

from tests.support.virtual_devices import *  # noqa: F403
from tests.support.virtual_devices import __all__  # noqa: F401
