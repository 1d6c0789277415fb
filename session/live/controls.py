"""The commands a GPT-Live session has that a Realtime one does not: ``VoiceSession.live``.

Each is one client event queued on the machine's protocol core, then flushed::

    await session.live.mute()
    await session.live.append("The order shipped today.", kind="commentary", delegation_id=request.delegation_id)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from voxline.realtime.errors import ConfigurationError

from .commands import ContextKind
from .machine import LiveMachine

if TYPE_CHECKING:
    from ..link import Link

__all__ = ["LiveControls"]


class LiveControls:
    def __init__(self, machine: object, link: Link) -> None:
        if not isinstance(machine, LiveMachine):
            raise ConfigurationError("these commands are GPT-Live's: open the session with api='live'")
        self._machine = machine
        self._link = link

    async def mute(self) -> None:
        """``session.input_audio.mute``: the model hears silence; the session stays open."""
        self._machine.mute()
        await self._link.flush()

    async def unmute(self) -> None:
        self._machine.unmute()
        await self._link.flush()

    async def append(self, content: str, *, kind: ContextKind = "instructions",
                     delegation_id: str | None = None) -> str:
        """Append context: ``instructions`` (kept through compaction), ``thinking`` (silent), ``commentary`` (to say)."""
        event_id = self._machine.append(content, kind=kind, delegation_id=delegation_id)
        await self._link.flush()
        return event_id

    async def answer_delegation(self, delegation_id: str, text: str, *, spoken: bool = True) -> str:
        """Answer work the model delegated to the app: commentary for it to say, or silent thinking."""
        return await self.append(text, kind="commentary" if spoken else "thinking", delegation_id=delegation_id)

    async def play_fixture(self, pcm: npt.NDArray[np.int16]) -> str:
        """Play one whole audio fixture (PCM16 24 kHz) through the session's output."""
        event_id = self._machine.play_fixture(pcm)
        await self._link.flush()
        return event_id

    async def close_session(self) -> None:
        """``session.close``: the server finalizes and answers ``session.closed`` (reason ``close_requested``)."""
        self._machine.close_session()
        await self._link.flush()

    @property
    def session_id(self) -> str | None:
        """The Live session's id (for a sideband, a fork, or its recording)."""
        session = self._machine.protocol.session if self._machine.carrying else None
        return session.get("id") if session else None
