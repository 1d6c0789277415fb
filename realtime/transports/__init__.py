"""Thin transports that move text frames; all protocol rules live in :mod:`voxline.realtime.protocol`."""

from .base import MemoryTransport, Transport, memory_pair

__all__ = ["MemoryTransport", "Transport", "memory_pair"]
