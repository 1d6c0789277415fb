"""Everything one Realtime session holds on the server, shared by the engine's parts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from voxline.base.models import DEFAULT_REALTIME_MODEL
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES
from voxline.realtime.server.engine.conversation import Conversation
from voxline.realtime.server.engine.hearing import HearingState
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.input_audio import InputAudio
from voxline.realtime.server.engine.responses import Pacing, ResponseRun
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.session_config import DEFAULT_INSTRUCTIONS, SessionConfig
from voxline.realtime.server.engine.speech import Synth, VoiceCache
from voxline.realtime.server.engine.usage import RateLimits

__all__ = ["MAX_AUDIO_BYTES", "MAX_BUFFER_BYTES", "EngineConfig", "SessionState", "Synth"]

MAX_AUDIO_BYTES = 15 * 1024 * 1024
"""Most audio one ``input_audio_buffer.append`` may carry (docs/protocol.md §11)."""
MAX_BUFFER_BYTES = 15 * 1024 * 1024
"""Most audio the input buffer holds before a commit: 5.5 minutes of 24 kHz PCM16, 33 of G.711.

With VAD on, silence before speech is dropped as it ages (:meth:`InputAudio.trim_silence`),
so the cap is met only by one utterance that long or by a manual-mode buffer never committed."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Per-session settings of the local server."""

    model: str = DEFAULT_REALTIME_MODEL
    pacing: Pacing = field(default_factory=Pacing)
    max_session_s: float = 3600.0
    session_identity: bool = True
    max_event_bytes: int = MAX_CLIENT_EVENT_BYTES
    max_audio_bytes: int = MAX_AUDIO_BYTES
    max_buffer_bytes: int = MAX_BUFFER_BYTES
    instructions: str = DEFAULT_INSTRUCTIONS
    transcription: bool = False  # a ?intent=transcription session: input transcripts only, no responses
    # False: items keep how much audio they hold, not its bytes (a retrieve returns them without audio); the
    # in-process engine of a replay, whose memory must not grow with the recording's length
    keep_item_audio: bool = True
    hearing: bool = False  # the driver recognises user audio (Engine.take_hearing / provide_hearing)

    @property
    def max_session_minutes(self) -> int:
        return max(1, math.ceil(self.max_session_s / 60.0))


@dataclass
class SessionState:
    """The mutable session: config, conversation, input buffer, responses in flight."""

    config: EngineConfig
    ids: IdFactory
    scenario: Scenario
    voices: VoiceCache
    session_id: str
    conversation_id: str
    expires_at: int
    session: SessionConfig
    conversation: Conversation = field(default_factory=Conversation)
    input: InputAudio = field(default_factory=InputAudio)
    rate_limits: RateLimits = field(default_factory=RateLimits)
    runs: list[ResponseRun] = field(default_factory=list)
    voice_locked: bool = False
    speech_item: str | None = None
    speech_start: int = 0
    turn_index: int = 0
    user_turns: int = 0  # user audio items committed so far (picks the scripted transcript)
    pending_after: object | None = None
    idle_deadline: float | None = None
    hearing: HearingState = field(default_factory=HearingState)

    def default_run(self) -> ResponseRun | None:
        """The response writing to the default conversation, if one is active."""
        for run in self.runs:
            if run.in_conversation and not run.done:
                return run
        return None

    def find_run(self, response_id: str) -> ResponseRun | None:
        for run in self.runs:
            if run.response_id == response_id and not run.done:
                return run
        return None
