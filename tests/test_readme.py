"""The README's library example runs as written (against the built-in server)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_readme_library_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Library") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "ToolFinished" in run.stdout and "weather report" in run.stdout
