"""The test tree's shape: test modules import shared helpers from ``tests/support/`` only.

A test module that imports another test module (or ``conftest``) runs that module's code, ties
the two together and hides what is shared; ``conftest.py`` holds the suite's fixtures and hooks,
nothing a test imports. Test and support modules are parsed, never imported, to check this.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# re-exports of moved support modules, kept while benchmarks/ imports them by these paths


def _imported(tree: ast.AST) -> list[str]:
    """Every name an import statement brings in, at any depth, dotted (relative ones with their dots)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names += [f"{base}{'.' if node.module else ''}{alias.name}" for alias in node.names]
    return names


def forbidden_imports(source: str) -> list[str]:
    """What ``source`` imports from the test tree other than ``tests.support`` (relative imports included)."""
    bad = []
    for name in _imported(ast.parse(source)):
        parts = name.split(".")
        if name.startswith("."):
            if not name.lstrip(".").startswith("support"):
                bad.append(name)
        elif parts[0] == "conftest" or (parts[0] == "tests" and parts[1:2] != ["support"]):
            bad.append(name)
    return bad


def test_the_check_finds_imports_of_test_modules_and_conftest() -> None:
    source = """
from tests.support.oracle import WireRecorder
import tests.support.heard
from tests.support import devices
from voxline.session import tests
from tests.test_cli import voxline
from tests import test_protocol
import tests.conftest
from conftest import IN_CI
from .test_mirror import wire
from .support.cli import EXAMPLE


def late() -> None:
    from tests.hostile import speech
"""
    assert forbidden_imports(source) == ["tests.test_cli.voxline", "tests.test_protocol", "tests.conftest",
                                         "conftest.IN_CI", ".test_mirror.wire", "tests.hostile.speech"]


def test_test_modules_import_shared_helpers_from_tests_support_only() -> None:
    bad = {path.name: found for path in sorted(TESTS.glob("test_*.py"))
           if (found := forbidden_imports(path.read_text()))}
    assert bad == {}


def test_support_modules_import_no_test_module() -> None:
    bad = {path.name: found for path in sorted((TESTS / "support").glob("*.py"))
           if (found := forbidden_imports(path.read_text()))}
    assert bad == {}


def test_conftest_holds_only_fixtures_and_hooks() -> None:
    tree = ast.parse((TESTS / "conftest.py").read_text())
    assert [name for name in _imported(tree) if name.startswith(("tests.", ".")) and not
            name.startswith("tests.support")] == []
    public = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
            fixture = any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))
            if fixture or node.name.startswith(("pytest_", "_")):
                continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            continue
        public += [name for name in names if not name.startswith("_")]
    assert public == [], "helpers tests import belong in tests/support/"


def test_beside_the_test_modules_there_is_no_helper_module() -> None:
    others = {path.name for path in TESTS.glob("*.py") if not path.name.startswith("test_")}
    assert others == {"__init__.py", "conftest.py"}
