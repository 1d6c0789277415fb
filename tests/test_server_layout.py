"""The local server's engine is sans-I/O: no module it reaches imports the event loop or the network.

Like an import linter (``tests/support/imports.py``): the imports of every module in
``voxline.realtime.server.engine`` are followed through voxline's own modules; what they reach
outside voxline is checked against the forbidden names.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support.imports import reached

FORBIDDEN = {"asyncio", "socket", "websockets", "aiortc"}
ENGINE = "voxline.realtime.server.engine"
NET = "voxline.realtime.server.net"


def _engine_modules() -> list[str]:
    spec = importlib.util.find_spec(ENGINE)
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    return [ENGINE, *(f"{ENGINE}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__")]


def test_the_engine_has_its_modules() -> None:
    assert {f"{ENGINE}.core", f"{ENGINE}.conversation", f"{ENGINE}.responses"} <= set(_engine_modules())


def test_no_engine_module_reaches_the_event_loop_or_the_network() -> None:
    seen = reached(_engine_modules())
    bad = {name: seen[name] for name in seen if name.split(".")[0] in FORBIDDEN or name.startswith(NET)}
    assert bad == {}, f"imported by: {bad}"


@pytest.mark.parametrize(("module", "forbidden"), [
    (f"{NET}.ws_session", "websockets"),
    (f"{NET}.rtc_call", "aiortc"),
    (f"{NET}.voicer", "asyncio"),
    (f"{NET}.workers", "socket"),
])
def test_the_walk_finds_what_the_network_side_imports(module: str, forbidden: str) -> None:
    assert forbidden in {name.split(".")[0] for name in reached([module])}
