"""The development install is one that static type checkers can read.

setuptools' default editable install of a ``package-dir`` mapping is an import hook, which
mypy and Pyright cannot follow; the strict mode chosen in pyproject.toml lays the package
out as links to the source files instead. That tree holds only the files present when it
was built, so uv rebuilds it when a file newer than the last build appears: every file the
package installs must be among the ``cache-keys`` that uv compares.
"""

from __future__ import annotations

import importlib.machinery
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _expand(pattern: str) -> list[str]:
    """``{a,b}`` alternatives spelled out (the glob syntax uv's cache keys accept)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    return [out for choice in match.group(1).split(",")
            for out in _expand(pattern[: match.start()] + choice + pattern[match.end():])]


def _package_folder(name: str) -> Path:
    mapping: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
    prefix = max((p for p in mapping if name == p or name.startswith(p + ".")), key=len)
    return ROOT / mapping[prefix] / Path(*name[len(prefix):].split(".")[1:])


def _installed_files() -> set[Path]:
    """Every module of every listed package, and its package data."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    files: set[Path] = set()
    for name in setuptools["packages"]:
        folder = _package_folder(name)
        files.update(folder.glob("*.py"))
        for pattern in setuptools["package-data"].get(name, []):
            files.update(folder.glob(pattern))
    return files


def test_voxline_is_found_on_the_path_without_an_import_hook() -> None:
    spec = importlib.machinery.PathFinder.find_spec("voxline")
    assert spec is not None and spec.origin is not None and spec.submodule_search_locations is not None
    assert Path(spec.origin).resolve() == ROOT / "session" / "voxline" / "__init__.py"
    layer = importlib.machinery.PathFinder.find_spec("voxline.realtime", list(spec.submodule_search_locations))
    assert layer is not None and layer.origin is not None
    assert Path(layer.origin).resolve() == ROOT / "realtime" / "__init__.py"


def test_every_installed_file_is_a_cache_key() -> None:
    keys = [key["file"] for key in PYPROJECT["tool"]["uv"]["cache-keys"] if "file" in key]
    covered = {path for key in keys for pattern in _expand(key) for path in ROOT.glob(pattern)}
    installed = _installed_files()
    assert len(installed) > 100  # the listing found the package's files
    assert sorted(str(p.relative_to(ROOT)) for p in installed - covered) == []
