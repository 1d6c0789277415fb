"""Identifiers in the service's style: ``event_…``, ``item_…``, ``resp_…``, ``sess_…``.

The suffix is 21 base-62 characters. A seeded factory gives reproducible ids for
tests. An unseeded one draws ordinary ids from its own pseudo-random generator,
seeded once from the operating system's randomness: ids name things, they guard
nothing, and a session mints one per event. What does guard something (an
ephemeral key, a call a URL can hang up) comes from :meth:`IdFactory.secret`, which
draws from the operating system every time.
"""

from __future__ import annotations

import os
import random
import secrets
import string
from typing import Any

__all__ = ["IdFactory", "event"]

_ALPHABET = string.ascii_letters + string.digits
# random bytes to suffix characters: bytes 0-247 map onto the 62 characters four times over, and
# bytes 248-255 are dropped, so that every character stays equally likely
_KEEP = 4 * len(_ALPHABET)
_TABLE = bytes(ord(_ALPHABET[b % len(_ALPHABET)]) if b < _KEEP else 0 for b in range(256))
_DROP = bytes(range(_KEEP, 256))


class IdFactory:
    """Makes prefixed ids; ``IdFactory(seed=1)`` repeats the same sequence every run."""

    def __init__(self, seed: int | None = None) -> None:
        self._seeded = seed is not None
        self._rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(32), "big"))

    def new(self, prefix: str, length: int = 21) -> str:
        """A fresh id such as ``item_C9G5RJeJ2gF77mV7f2B1j``."""
        # one draw of bytes and one table lookup: a server mints an id for every event it sends
        suffix = b""
        while len(suffix) < length:
            suffix += self._rng.randbytes(length - len(suffix) + 8).translate(_TABLE, _DROP)
        return f"{prefix}_{suffix[:length].decode('ascii')}"

    def derived(self) -> IdFactory:
        """A factory of its own for one session: seeded from this one when seeded (each session its own sequence,
        the same every run: two sessions of a seeded server never share ids), unseeded otherwise."""
        return IdFactory(self._rng.getrandbits(64)) if self._seeded else IdFactory()

    def secret(self, prefix: str, length: int = 21) -> str:
        """Like :meth:`new`, but unpredictable from earlier ids when unseeded (keys, capability URLs)."""
        if self._seeded:
            return self.new(prefix, length)
        return f"{prefix}_{''.join(secrets.choice(_ALPHABET) for _ in range(length))}"


def event(ids: IdFactory, type_: str, **fields: Any) -> dict[str, Any]:
    """A server event: ``type`` and a fresh ``event_id`` first, then ``fields``."""
    return {"type": type_, "event_id": ids.new("event"), **fields}
