"""An import linter for tests: what a module imports when it runs, and every module that reaches.

Imports are read from the source (at any depth, in functions too) and followed through
voxline's own modules as they are installed. Left out, since they do not run on import:
``if TYPE_CHECKING:`` blocks, and a package's ``__getattr__`` (names it loads on first use, as
``voxline.audio`` does for the sound devices). ``from package import submodule`` counts as the
submodule: a package's ``__init__`` is walked only where a name of its own is imported.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

__all__ = ["imports_in", "imports_of", "reached"]


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def imports_in(path: Path, module: str) -> set[str]:
    """The modules the source at ``path`` (module ``module``) names in the import statements it runs."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__" and path.name == "__init__.py":
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
            for alias in node.names:  # a submodule named is that module; any other name is the package's
                child = f"{base}.{alias.name}"
                found.add(child if base.startswith("voxline") and _is_module(child) else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def imports_of(module: str) -> set[str]:
    """What the installed voxline module ``module`` imports when it runs."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return imports_in(Path(spec.origin), module)


def reached(roots: list[str]) -> dict[str, str]:
    """Every module reached from ``roots`` through voxline's modules, with the voxline module that imports it."""
    seen: dict[str, str] = {root: root for root in roots}
    todo = list(roots)
    while todo:
        current = todo.pop()
        for name in imports_of(current):
            if name in seen:
                continue
            seen[name] = current
            if name.split(".")[0] == "voxline" and _is_module(name):
                todo.append(name)
    return seen
