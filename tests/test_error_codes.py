"""Every code a session's ``SessionError`` can carry is listed where the application reads about them."""

from __future__ import annotations

import ast
from pathlib import Path

from voxline.session.events import SessionError

ROOT = Path(__file__).resolve().parents[1]


def _codes_in_source() -> set[str]:
    """The literal codes of ``SessionError(...)`` calls, and those :func:`guarded` makes from a loop's name."""
    codes: set[str] = set()
    for path in (ROOT / "session").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            args = [*node.args, *(k.value for k in node.keywords if k.arg == "code")]
            if node.func.id == "SessionError" and len(args) >= 2:
                code = args[1]
            elif node.func.id == "guarded" and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    codes.add(name.value.replace(" ", "_") + "_failed")
                continue
            else:
                continue
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                codes.add(code.value)
    return codes


def test_every_session_error_code_is_documented() -> None:
    codes = _codes_in_source()
    assert {"connection_lost", "input_failed", "output_failed", "malformed_event"} <= codes  # the scan finds them
    doc = SessionError.__doc__ or ""
    missing = sorted(code for code in codes if f"``{code}``" not in doc)
    assert not missing, f"SessionError's docstring does not list {missing}"
