"""The model names voxline asks for when none is given.

``gpt-realtime``, ``gpt-realtime-mini`` and their snapshots are announced for shutdown on
2027-01-20, ``whisper-1`` and the ``gpt-4o-*-transcribe`` models on 2027-02-26 (the
``openai`` package's model docs, 3.57.0). The defaults are the current ones the SDK
lists; every entry point takes another name (``--model``, ``VOXLINE_MODEL``,
``VOXLINE_TRANSCRIPTION_MODEL``, ``model=``), and the local server accepts any name.
"""

from __future__ import annotations

__all__ = ["DEFAULT_LIVE_MODEL", "DEFAULT_REALTIME_MODEL", "DEFAULT_TRANSCRIPTION_MODEL"]

DEFAULT_REALTIME_MODEL = "gpt-realtime-2.1"
DEFAULT_TRANSCRIPTION_MODEL = "gpt-transcribe"
DEFAULT_LIVE_MODEL = "gpt-live-1"  # the GPT-Live interface (/v1/live/sessions)
