"""The one results file: ``run_all --short`` fills every section, the README's table is made from it.

The short run is the CI check that every benchmark still runs (its figures are not asserted on,
only their presence and shape); it writes into a temporary folder and must leave the tree as it
was. The README test keeps the generated block equal to what ``benchmarks.table`` makes of the
committed ``benchmarks/results.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import record, run_all, table
from tests.support.ci import IN_CI
from tests.support.devices import require_pulse

ROOT = Path(__file__).resolve().parent.parent
# what each section's figures must hold, beyond having no missing number
KEYS = {
    "decode": {"sizes", "base64_backend"},
    "encode": {"sizes", "base64_backend"},
    "truncation": {"cases", "runs", "reply_ms"},
    "device": {"cases"},
    "duplex": {"cpu_s_per_audio_s", "ratios_cpu"},
    "open_speakers": {"replays", "dsp", "no_echo"},
    "server": {"server", "ids", "vad"},
    "setup": {"servers", "serve_start"},
    "memory": {"rss_per_ready_session", "held_per_audio_second", "peak_rss_by_length"},
    "concurrent": {"runs", "parameters", "machine"},
}
NEEDS_TOOLS = {"truncation", "open_speakers"}  # espeak-ng, sox, libspeexdsp: must be there in CI


def git_state() -> str:
    """Tracked changes and untracked files, as ``git status`` lists them."""
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def run_short(tmp_path: Path, *selection: str) -> tuple[dict[str, Any], str]:
    """``python3 -m benchmarks.run_all --short`` with ``selection`` into ``tmp_path``; the results and the output."""
    out = tmp_path / "results.json"
    env = {**os.environ, "VOXLINE_BENCH_OUT": str(tmp_path / "default"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.run_all", "--short", *selection, "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "default").exists(), "--out was given: nothing goes to the default place"
    return json.loads(out.read_text()), done.stdout


def check_sections(data: dict[str, Any], names: set[str]) -> None:
    assert record.problems(data) == []
    assert set(data["sections"]) == names
    for name, section in data["sections"].items():
        assert section["measured"]["short"] is True
        assert section["measured"]["machine"]["cores"] == os.cpu_count()
        if "skipped" in section:
            assert name in NEEDS_TOOLS and not IN_CI, f"{name} was skipped: {section['skipped']}"
            continue
        assert KEYS[name] <= set(section["figures"]), name


@pytest.mark.slow
def test_the_short_run_fills_every_section_and_leaves_the_tree_alone(tmp_path: Path) -> None:
    before = git_state()
    data, output = run_short(tmp_path, "--skip", "device")  # the device section: test below, marked `device`
    assert git_state() == before
    check_sections(data, set(record.SECTIONS) - {"device"})
    concurrent = data["sections"]["concurrent"]["figures"]
    assert [r["sessions"] for r in concurrent["runs"]] == [10] and concurrent["runs"][0]["failed"] == 0
    truncation = data["sections"].get("truncation", {}).get("figures")
    if truncation is not None:
        models = {c["device_latency"] for c in truncation["cases"].values()}
        assert models == {"none", "modelled"}
        assert all("(modelled)" in c["label"] for c in truncation["cases"].values() if c["device_latency"] == "modelled")
    assert "written to" in output
    rendered = table.render(data)  # every section renders
    assert "Concurrent real-time sessions" in rendered and "session ready" in rendered


@pytest.mark.slow
@pytest.mark.device
def test_the_short_run_measures_a_real_device(tmp_path: Path) -> None:
    require_pulse()
    data, _output = run_short(tmp_path, "--only", "device")
    check_sections(data, {"device"})
    (case,) = data["sections"]["device"]["figures"]["cases"].values()
    assert case["cuts"] == 2 and case["error_ms"]["ledger"]["n"] == 2


def test_the_readme_table_is_generated_from_the_committed_results() -> None:
    readme = (ROOT / "README.md").read_text()
    start, end = table.block(readme)
    assert readme[start:end] == "\n" + table.render(record.load(record.TRACKED)) + "\n", (
        "README.md's benchmark block differs from benchmarks/results.json: python3 -m benchmarks.table")
    assert record.problems(record.load(record.TRACKED)) == []
    assert set(record.load(record.TRACKED)["sections"]) == set(record.SECTIONS)


def test_the_default_results_file_is_outside_the_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VOXLINE_BENCH_OUT", raising=False)
    assert ROOT not in record.default_path().resolve().parents
    assert record.target(False) == record.default_path() and record.target(True) == record.TRACKED
    monkeypatch.setenv("VOXLINE_BENCH_OUT", str(tmp_path))
    assert record.default_path() == tmp_path / "results.json"


def test_a_section_is_replaced_and_the_others_kept(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with record.measuring(short=True) as m:
        pass
    record.save_section(path, "concurrent", {"measured": m.info, "figures": {"runs": [1]}})
    record.save_section(path, "decode", {"measured": m.info, "figures": {"sizes": {}}})
    record.save_section(path, "concurrent", {"measured": m.info, "figures": {"runs": [2]}})
    data = record.load(path)
    assert list(data["sections"]) == ["decode", "concurrent"]  # in the order of the report
    assert data["sections"]["concurrent"]["figures"] == {"runs": [2]}
    record.save_section(path, "decode", {"measured": m.info, "figures": {"x": float("nan")}})
    assert record.load(path)["sections"]["decode"]["figures"] == {"x": None}  # NaN is not JSON
    assert record.problems(record.load(path)) == ["decode: figure .x is missing"]
    with pytest.raises(ValueError, match="unknown section"):
        record.save_section(path, "nonsense", {})


def test_a_skip_keeps_the_figures_measured_before_and_a_new_measurement_replaces_them(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with record.measuring(short=True) as m:
        pass
    record.save_section(path, "device", {"measured": m.info, "skipped": "no PulseAudio"})
    assert record.load(path)["sections"]["device"]["skipped"] == "no PulseAudio"  # nothing measured yet: say why
    record.save_section(path, "device", {"measured": m.info, "figures": {"cuts": 5}})
    record.save_section(path, "device", {"measured": m.info, "skipped": "no PulseAudio"})
    assert record.load(path)["sections"]["device"]["figures"] == {"cuts": 5}  # a machine without one erases nothing
    record.save_section(path, "device", {"measured": m.info, "figures": {"cuts": 6}})
    assert record.load(path)["sections"]["device"]["figures"] == {"cuts": 6}


def test_a_skipped_section_says_why_in_the_table(tmp_path: Path) -> None:
    with record.measuring(short=False) as m:
        pass
    data = {"schema": record.SCHEMA, "sections": {"device": {"measured": m.info, "skipped": "no PulseAudio"}}}
    assert record.problems(data) == []
    rendered = table.render(data)
    assert "skipped: no PulseAudio" in rendered and "not measured" in rendered  # the other sections


def test_update_readme_rewrites_only_the_block(tmp_path: Path) -> None:
    readme, results = tmp_path / "README.md", tmp_path / "results.json"
    readme.write_text(f"# x\n\nbefore\n{table.BEGIN}\nstale\n{table.END}\nafter\n")
    with record.measuring(short=False) as m:
        pass
    record.save_section(results, "device", {"measured": m.info, "skipped": "no PulseAudio"})
    table.update_readme(readme, results)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{table.END}\nafter\n") and "stale" not in text
    assert "skipped: no PulseAudio" in text
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="benchmarks:begin"):
        table.update_readme(readme, results)


@pytest.mark.parametrize(("args", "message"), [
    (["--short", "--write-results"], "not with --short"),
    (["--only", "nonsense"], "unknown section 'nonsense'"),
])
def test_run_all_refuses_bad_requests(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_all.main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_measurement_notes_the_hosts_speed_and_the_table_shows_it(tmp_path: Path) -> None:
    with record.measuring(short=True) as m:
        pass
    before, after = m.info["reference_ms_before"], m.info["reference_ms_after"]
    assert isinstance(before, float) and isinstance(after, float) and before > 0 and after > 0
    path = tmp_path / "results.json"
    record.save_section(path, "decode", {"measured": m.info, "figures": {"sizes": {}}})
    old = {**m.info}
    del old["reference_ms_before"], old["reference_ms_after"]  # a section measured before the speed was noted
    record.save_section(path, "encode", {"measured": old, "figures": {"sizes": {}}})
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table._measured(record.load(path)["sections"])}
    assert f"{before:.0f} → {after:.0f}" in rows["decode"]
    assert rows["encode"].count("—") == 1  # no speed to show, and nothing else missing


def test_the_clients_run_at_once_get_a_column_of_their_own_only_when_measured() -> None:
    runs = [{"sessions": 50, "client_cpu_per_session_s": 0.0075}]
    floor = {"sessions": 50, "client_cpu_per_session_s": 0.005, "voxline_ratio": 1.5, "failed": 0}
    both = {"sessions": 50, "voxline_ratio": 1.62,
            "voxline": {"client_cpu_per_session_s": 0.0068, "failed": 0},
            "bare": {"client_cpu_per_session_s": 0.0042, "failed": 1}}
    without = "\n".join(table._beside({"runs": runs, "floor": [floor]}))
    assert "at once" not in without  # results measured before the side-by-side run keep their table
    measured = "\n".join(table._beside({"runs": runs, "floor": [floor], "side_by_side": [both]}))
    header, row = (line for line in measured.splitlines() if line.startswith("| ") and "---" not in line)
    assert header.rstrip(" |").endswith("at once: voxline / bare receivers")
    assert row.rstrip(" |").endswith("0.68% / 0.42% (**1.62x**; 1 failed)")
    peer = {"sessions": 50, "voxline_ratio": 0.75,
            "voxline": {"client_cpu_per_session_s": 0.0069, "failed": 0},
            "peer": {"client_cpu_per_session_s": 0.0092, "failed": 0}}
    measured = "\n".join(table._beside({"runs": runs, "floor": [floor], "side_by_side": [both], "peers_at_once": [peer]}))
    header, row = (line for line in measured.splitlines() if line.startswith("| ") and "---" not in line)
    assert header.rstrip(" |").endswith("at once: voxline / bare receivers | at once: voxline / openai-agents")
    assert row.rstrip(" |").endswith("(**1.62x**; 1 failed) | 0.69% / 0.92% (**0.75x**)")
