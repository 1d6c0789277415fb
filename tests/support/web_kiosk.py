"""The browser kiosk's backend (``examples/web_kiosk/backend.py``), loaded as a module for tests."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.support.ci import ROOT

__all__ = ["KIOSK", "load_backend"]

KIOSK = ROOT / "examples" / "web_kiosk"


def load_backend() -> ModuleType:
    spec = importlib.util.spec_from_file_location("web_kiosk_backend", KIOSK / "backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
