"""The voxline local server: a protocol-faithful stand-in for the OpenAI Realtime API.

It detects speech by energy, follows scripted replies (:mod:`.scenario`) and speaks
them (espeak-ng when installed, else a synthetic tone voice); it does not
understand speech. Layers: :mod:`.engine` (sans-I/O, plain dicts; it reads voiced replies
from a :class:`~.speech.VoiceCache` and never synthesizes) →
:mod:`.ws_session` / :mod:`.webrtc` (WebRTC calls) / :mod:`.app` (websockets, HTTP) → :mod:`.cli` (``voxline serve``).
"""

from voxline.realtime.server.app import Server, serve
from voxline.realtime.server.catalog import EMITTED_EVENT_TYPES
from voxline.realtime.server.cli import add_serve_arguments, main_serve, run_serve
from voxline.realtime.server.config import FaultConfig, ServerConfig
from voxline.realtime.server.engine import Engine
from voxline.realtime.server.scenario import Scenario, load_scenario
from voxline.realtime.server.speech import VoiceCache
from voxline.realtime.server.state import EngineConfig
from voxline.realtime.server.voices import supply_speech
from voxline.realtime.server.webrtc import RealtimeCalls

__all__ = [
    "EMITTED_EVENT_TYPES",
    "Engine",
    "EngineConfig",
    "FaultConfig",
    "RealtimeCalls",
    "Scenario",
    "Server",
    "ServerConfig",
    "VoiceCache",
    "add_serve_arguments",
    "load_scenario",
    "main_serve",
    "run_serve",
    "serve",
    "supply_speech",
]
