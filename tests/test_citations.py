"""Every document the tree cites is in the tree, and so is every section it names.

A citation is a path ending in ``.md`` in a ``*.py``, ``*.md`` or ``*.toml`` file or a file of
``.ci/``, resolved from the repository's root or from the citing file's folder. The section
comes right after the path (on the same line or the next, past a comment marker):

* ``§4``, ``§5–7``, ``§4, §9``: numbered sections, headings that start with the number
  (``## 4. Session configuration``);
* ``§How do I…``: a named section, a heading whose title starts the rest of the line;
* ``#anchor`` (a Markdown link): a heading whose GitHub anchor it is.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PATH = re.compile(r"(?<![\w./-])((?:\.\.?/)*(?:[\w.-]+/)*[\w-][\w.-]*\.md)(?![\w-])")
GAP = re.compile(r"[ \t]*(?:\n[ \t]*(?:#+|\*|//)?[ \t]*)?")
NUMBERS = re.compile(r"§[ \t]*(\d+(?:\.\d+)*)(?:[ \t]*[–-][ \t]*(\d+))?")
MORE = re.compile(r"[ \t]*(?:,|and|&)[ \t]*(?=§)")
ANCHOR = re.compile(r"#([\w-]+)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")


@dataclass(frozen=True)
class Citation:
    line: int
    target: str
    sections: tuple[str, ...] = ()  # "4", "4.2", "name:How do I", "anchor:how-do-i"


def citations(text: str) -> list[Citation]:
    """The ``.md`` citations in ``text``, with the sections each one names."""
    found = []
    for match in PATH.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        pos = match.end()
        anchor = ANCHOR.match(text, pos)
        if anchor:
            found.append(Citation(line, match.group(1), ("anchor:" + anchor.group(1),)))
            continue
        pos = GAP.match(text, pos).end()  # type: ignore[union-attr]
        sections: list[str] = []
        while pos < len(text) and text[pos] == "§":
            number = NUMBERS.match(text, pos)
            if number is None:  # a named section: the rest of the line
                end = text.find("\n", pos)
                sections.append("name:" + text[pos + 1 : None if end < 0 else end].strip())
                break
            first, last = number.group(1), number.group(2)
            if last is None:
                sections.append(first)
            else:
                sections.extend(str(n) for n in range(int(first.split(".")[0]), int(last) + 1))
            pos = number.end()
            more = MORE.match(text, pos)
            if more is None:
                break
            pos = more.end()
        found.append(Citation(line, match.group(1), tuple(sections)))
    return found


def headings(text: str) -> list[str]:
    """The titles of a Markdown document's headings, fenced code left out."""
    titles, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := HEADING.match(line)):
            titles.append(heading.group(1))
    return titles


def slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def has_section(titles: list[str], section: str) -> bool:
    if section.startswith("anchor:"):
        return section.removeprefix("anchor:") in {slug(t) for t in titles}
    if section.startswith("name:"):
        wanted = section.removeprefix("name:").casefold()
        return any(t and wanted.startswith(t.casefold()) for t in titles)
    number = re.compile(rf"§?[ \t]*{re.escape(section)}(?:[.)]|[ \t]|$)")
    return any(number.match(t) for t in titles)


@cache
def tracked() -> frozenset[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return frozenset(files.stdout.splitlines())


def cited_files() -> list[str]:
    return sorted(name for name in tracked()
                  if name.endswith((".py", ".md", ".toml")) or name.startswith(".ci/"))


def resolve(citing: str, target: str) -> str | None:
    """The tracked file ``target`` names, from the root or from ``citing``'s folder."""
    for base in ("", os.path.dirname(citing)):
        candidate = os.path.normpath(os.path.join(base, target))
        if candidate in tracked():
            return candidate
    return None


def shown(section: str) -> str:
    return ("#" + section[7:] if section.startswith("anchor:")
            else "§" + section.removeprefix("name:"))


def problems(citing: str, text: str) -> list[str]:
    out = []
    for cite in citations(text):
        where = f"{citing}:{cite.line} cites {cite.target}"
        doc = resolve(citing, cite.target)
        if doc is None:
            out.append(f"{where}, which is not in the repository")
            continue
        titles = headings((ROOT / doc).read_text(encoding="utf-8"))
        out.extend(f"{where} {shown(section)}, which has no such section"
                   for section in cite.sections if not has_section(titles, section))
    return out


def test_every_cited_document_and_section_is_in_the_repository() -> None:
    found = []
    for name in cited_files():
        path = ROOT / name
        if path.is_file():
            found.extend(problems(name, path.read_text(encoding="utf-8", errors="replace")))
    assert found == [], "\n".join(found)


MD = ".md"  # kept apart from the names below, so that this file cites nothing itself


def test_the_reader_finds_sections_in_every_spelling() -> None:
    text = (f'"""Rules (docs/protocol{MD} §4, §9; see also docs/protocol{MD}\n    §5–7).\n'
            f'# the lifecycle: ../docs/ARCHITECTURE{MD} §How do I… and [x](README{MD}#tests)\n'
            f"(README{MD}) and notes{MD}x and a{MD} and glob *{MD}")
    assert citations(text) == [
        Citation(1, f"docs/protocol{MD}", ("4", "9")),
        Citation(1, f"docs/protocol{MD}", ("5", "6", "7")),
        Citation(3, f"../docs/ARCHITECTURE{MD}", ("name:How do I… and [x](README.md#tests)",)),
        Citation(3, f"README{MD}", ("anchor:tests",)),
        Citation(4, f"README{MD}"),
        Citation(4, f"a{MD}"),
    ]


def test_a_missing_file_or_section_is_reported() -> None:
    good = f"README{MD} §Tests, README{MD}#tests, README{MD} §Command line flags"
    assert problems("session/x.py", good) == []
    bad = f"(notes/DES{MD} §2) README{MD} §3, §Tests\n README{MD}#nowhere README{MD} §Nowhere to be found"
    assert problems("session/x.py", bad) == [
        f"session/x.py:1 cites notes/DES{MD}, which is not in the repository",
        f"session/x.py:1 cites README{MD} §3, which has no such section",
        f"session/x.py:2 cites README{MD} #nowhere, which has no such section",
        f"session/x.py:2 cites README{MD} §Nowhere to be found, which has no such section",
    ]
    assert problems("examples/x.py", f"../README{MD} §Tests") == []
