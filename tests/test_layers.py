"""Who may import whom (docs/ARCHITECTURE.md): base imports nothing of voxline; audio only base; the
wire (realtime) only base, its local server also audio; nothing below the session reaches it."""

from __future__ import annotations

import pkgutil

import pytest

import voxline.audio
import voxline.base
import voxline.realtime
from tests.support.imports import reached


def _modules(package: object) -> list[str]:
    name = package.__name__  # type: ignore[attr-defined]
    return [name, *(m.name for m in pkgutil.walk_packages(package.__path__, f"{name}."))]  # type: ignore[attr-defined]


def _server(name: str) -> bool:
    return name.startswith("voxline.realtime.server")


@pytest.mark.parametrize(("package", "allowed"), [
    (voxline.base, ("voxline.base",)),
    (voxline.audio, ("voxline.base", "voxline.audio")),
    (voxline.realtime, ("voxline.base", "voxline.realtime", "voxline.audio")),
])
def test_no_layer_reaches_one_above_it(package: object, allowed: tuple[str, ...]) -> None:
    for module in _modules(package):
        seen = reached([module])
        mine = [name for name in seen if name.startswith("voxline.") or name == "voxline"]
        bad = {name: seen[name] for name in mine
               if name != "voxline" and not name.startswith(allowed)
               or (name.startswith("voxline.audio") and package is voxline.realtime and not _server(module))}
        assert bad == {}, f"{module} reaches: {bad}"
