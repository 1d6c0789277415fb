"""The local server's engine is sans-I/O: no module it reaches imports the event loop or the network.

Like an import linter: the imports of every module in ``voxline.realtime.server.engine`` are
read from its source (at any depth, in functions too) and followed through voxline's own
modules; what they reach outside voxline is checked against the forbidden names.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

FORBIDDEN = {"asyncio", "socket", "websockets", "aiortc"}
ENGINE = "voxline.realtime.server.engine"
NET = "voxline.realtime.server.net"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _imports(module: str) -> set[str]:
    """The modules ``module`` names in its import statements."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    path = Path(spec.origin)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if base.startswith("voxline") and _is_module(child) else base)
    return found


def reached(roots: list[str]) -> dict[str, str]:
    """Every module reached from ``roots``, with the voxline module that imports it."""
    seen: dict[str, str] = {root: root for root in roots}
    todo = list(roots)
    while todo:
        current = todo.pop()
        for name in _imports(current):
            if name in seen:
                continue
            seen[name] = current
            if name.split(".")[0] == "voxline":
                todo.append(name)
    return seen


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
