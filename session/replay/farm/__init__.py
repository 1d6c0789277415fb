"""Replay farms: many recordings replayed at once, each judged against its expectations.

* :mod:`.manifest` — which recordings (WAV paths, a directory, a TOML manifest) and what each must show;
* :mod:`.plan` — shards for machines (``--shard I/N``, 0-based) and parts for worker processes;
* :mod:`.runner` — many sessions on one event loop (``--jobs``);
* :mod:`.processes` — that loop in many worker processes (``--processes``) that end with the command;
* :mod:`.layout` — each recording's folder under ``--out-dir``, safe and unique, and no output over an input;
* :mod:`.ray_backend` — the same parts as Ray tasks (``--ray``, the optional ``voxline[ray]``);
* :mod:`.results` and :mod:`.report_junit` — the verdicts as JSON lines and as JUnit XML.
"""

from .manifest import Expectations, FarmRecording, Range, load_manifest, recordings_from_paths
from .plan import Shard, deal, parse_shard
from .report_junit import junit_xml, write_junit
from .results import Check, Outcome, VerdictJournal, summary_line, write_jsonl
from .processes import run_processes
from .runner import FarmOptions, run_farm, run_part

__all__ = ["Check", "Expectations", "FarmOptions", "FarmRecording", "Outcome", "Range", "Shard", "VerdictJournal", "deal",
           "junit_xml", "load_manifest", "parse_shard", "recordings_from_paths", "run_farm", "run_part", "run_processes",
           "summary_line", "write_jsonl", "write_junit"]
