"""Identifiers in the service's style: ``event_…``, ``item_…``, ``resp_…``, ``sess_…``.

The suffix is 21 base-62 characters. A seeded factory gives reproducible ids for
tests; an unseeded one draws from the operating system's randomness.
"""

from __future__ import annotations

import random
import secrets
import string
from typing import Any

__all__ = ["IdFactory", "event"]

_ALPHABET = string.ascii_letters + string.digits


class IdFactory:
    """Makes prefixed ids; ``IdFactory(seed=1)`` repeats the same sequence every run."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng: random.Random | None = random.Random(seed) if seed is not None else None

    def new(self, prefix: str, length: int = 21) -> str:
        """A fresh id such as ``item_C9G5RJeJ2gF77mV7f2B1j``."""
        if self._rng is None:
            suffix = "".join(secrets.choice(_ALPHABET) for _ in range(length))
        else:
            suffix = "".join(self._rng.choice(_ALPHABET) for _ in range(length))
        return f"{prefix}_{suffix}"


def event(ids: IdFactory, type_: str, **fields: Any) -> dict[str, Any]:
    """A server event: ``type`` and a fresh ``event_id`` first, then ``fields``."""
    return {"type": type_, "event_id": ids.new("event"), **fields}
