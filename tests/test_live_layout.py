"""The Live engine is sans-I/O: its modules reach neither the event loop, the network, nor the server's net side."""

from __future__ import annotations

from tests.support.imports import reached

FORBIDDEN = {"asyncio", "socket", "websockets", "aiortc"}
LIVE = "voxline.realtime.server.live"
SANS_IO = ["engine", "speaker", "track", "backend", "settings", "schema", "audio", "errors"]
NETWORK = ["ws", "rtc", "hub", "routes"]


def test_no_live_engine_module_reaches_the_event_loop_or_the_network() -> None:
    seen = reached([f"{LIVE}.{name}" for name in SANS_IO])
    bad = {name: seen[name] for name in seen
           if name.split(".")[0] in FORBIDDEN or name.startswith("voxline.realtime.server.net")
           or any(name == f"{LIVE}.{net}" for net in NETWORK)}
    assert bad == {}, f"imported by: {bad}"


def test_the_walk_finds_what_the_live_network_side_imports() -> None:
    assert "websockets" in {name.split(".")[0] for name in reached([f"{LIVE}.ws"])}
    assert "aiortc" in {name.split(".")[0] for name in reached([f"{LIVE}.rtc"])}
