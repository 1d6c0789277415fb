"""The voxline local server: a protocol-faithful stand-in for the OpenAI Realtime API.

It detects speech by energy, follows scripted replies (:mod:`.engine.scenario`) and speaks
them (espeak-ng when installed, else a synthetic tone voice); it does not
understand speech. Layers: :mod:`.engine` (sans-I/O, plain dicts; it reads voiced replies
from a :class:`~.engine.speech.VoiceCache` and never synthesizes) →
:mod:`.net` (:mod:`.net.ws_session` / :mod:`.net.webrtc` (WebRTC calls) / :mod:`.net.app` (websockets, HTTP) → :mod:`.net.cli` (``voxline serve``)).
"""

from voxline.realtime.server.engine.catalog import EMITTED_EVENT_TYPES
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.scenario import Scenario, load_scenario
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import supply_speech
from voxline.realtime.server.net.app import Server, serve
from voxline.realtime.server.net.cli import add_serve_arguments, main_serve, run_serve
from voxline.realtime.server.net.config import FaultConfig, ServerConfig
from voxline.realtime.server.net.webrtc import RealtimeCalls

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
