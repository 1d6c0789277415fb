"""Tool descriptions from docstrings: the summary paragraph and per-parameter lines.

Understands the two common layouts for parameter descriptions::

    Args:                       :param city: The city to look up.
        city: The city to look up.
        days (int): How many days,
            continued on the next line.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$")
_ANY_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_GOOGLE_PARAM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Docstring:
    """What a docstring says: a one-line summary and descriptions keyed by parameter name."""

    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def _one_line(lines: list[str]) -> str:
    return " ".join(part.strip() for part in lines if part.strip())


def _summary(lines: list[str]) -> str:
    """The first paragraph, stopping at a blank line or a section header."""
    head: list[str] = []
    for line in lines:
        if not line.strip():
            if head:
                break
            continue
        if _ANY_SECTION.match(line.strip()) or line.strip().startswith(":param"):
            break
        head.append(line)
    return _one_line(head)


def _google_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, list[str]] = {}
    current: str | None = None
    base_indent: int | None = None
    in_section = False
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if _SECTION.match(stripped):
            in_section, current, base_indent = True, None, None
            continue
        if not in_section:
            continue
        if not stripped:
            current = None
            continue
        if indent == 0:
            in_section = False
            continue
        if base_indent is None:
            base_indent = indent
        match = _GOOGLE_PARAM.match(stripped)
        if indent <= base_indent and match:
            current = match.group(1)
            params[current] = [match.group(2)]
        elif current is not None:
            params[current].append(stripped)
    return {name: _one_line(text) for name, text in params.items()}


def _sphinx_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        match = _SPHINX_PARAM.match(stripped)
        if match:
            current = match.group(1)
            params[current] = [match.group(2)]
        elif current is not None and stripped and not stripped.startswith(":"):
            params[current].append(stripped)
        else:
            current = None
    return {name: _one_line(text) for name, text in params.items()}


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into its summary paragraph and parameter descriptions."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    params = _sphinx_params(lines)
    params.update(_google_params(lines))
    return Docstring(summary=_summary(lines), params={k: v for k, v in params.items() if v})
