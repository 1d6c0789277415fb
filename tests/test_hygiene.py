"""The tree a newcomer clones: a licence matching the metadata, working doc links, and
benchmarks that leave tracked files alone unless asked."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from benchmarks import record

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked(suffix: str) -> list[Path]:
    files = subprocess.run(["git", "ls-files", f"*{suffix}"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in files.stdout.split()]


def test_the_license_file_is_the_mit_license_the_metadata_names() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in license_text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "MIT"}


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for doc in tracked(".md"):
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{doc.relative_to(ROOT)} → {target}")
    assert broken == []


def test_docs_name_no_file_that_is_not_in_the_tree() -> None:
    names = {p.name for p in tracked("")}
    missing = []
    for doc in tracked(".md"):
        for name in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", doc.read_text()):
            if name not in names:
                missing.append(f"{doc.relative_to(ROOT)} names {name}")
    assert missing == []


def test_benchmarks_write_outside_tracked_files_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = __import__("argparse").ArgumentParser()
    record.add_output_arguments(parser)
    monkeypatch.delenv("VOXLINE_BENCH_OUT", raising=False)
    assert ROOT not in record.target(parser.parse_args([]).write_results).resolve().parents
    assert record.target(parser.parse_args(["--write-results"]).write_results) == ROOT / "benchmarks" / "results.json"
    monkeypatch.setenv("VOXLINE_BENCH_OUT", str(tmp_path))
    assert record.target(False) == tmp_path / "results.json"
