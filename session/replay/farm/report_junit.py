"""JUnit XML for CI systems: one ``<testsuite>``, one ``<testcase>`` per recording.

A recording whose expectations failed gets a ``<failure>``, one that could not run or ended
on a fatal session error an ``<error>``; each carries a one-line ``message`` and, as text,
every check with its measured value. Built with :mod:`xml.etree`, so names and messages
are escaped whatever they hold; characters XML cannot hold at all (control characters, a
manifest's name with an escape sequence in it) are written as ``\\xNN``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from voxline.base.files import replaced, utf8

from .results import Outcome

__all__ = ["junit_xml", "write_junit"]


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """``text`` with what no XML 1.0 document may hold written as an escape a reader can see."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                        text)


def junit_xml(outcomes: list[Outcome], suite: str = "voxline replay", wall_s: float = 0.0) -> str:
    failures = sum(o.status == "fail" for o in outcomes)
    errors = sum(o.status == "error" for o in outcomes)
    root = ET.Element("testsuites", name=suite, tests=str(len(outcomes)), failures=str(failures),
                      errors=str(errors), time=f"{wall_s:.3f}")
    testsuite = ET.SubElement(root, "testsuite", name=suite, tests=str(len(outcomes)), failures=str(failures),
                              errors=str(errors), skipped="0", time=f"{wall_s:.3f}")
    for o in outcomes:
        case = ET.SubElement(testsuite, "testcase", classname="voxline.replay", name=_xml(o.name), file=_xml(o.input),
                             time=f"{o.wall_s:.3f}")
        if o.status != "pass":
            kind = "failure" if o.status == "fail" else "error"
            element = ET.SubElement(case, kind, message=_xml(o.message()),
                                    type="expectation" if kind == "failure" else "replay")
            element.text = _xml("\n".join(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: expected {c.expected}, "
                                          f"measured {c.measured}" for c in o.checks) or (o.error or ""))
        out = [f"barge-ins: {o.barge_ins}", f"cut errors ms: {o.cut_errors_ms}",
               f"reply latencies ms: {o.reply_latencies_ms}", f"error codes: {o.error_codes}"]
        ET.SubElement(case, "system-out").text = _xml("\n".join(out))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, outcomes: list[Outcome], wall_s: float = 0.0) -> None:
    """The JUnit file, whole (:func:`~voxline.base.files.replaced`): a CI job killed while writing it keeps the last one."""
    with replaced(path) as file:
        file.write(utf8(junit_xml(outcomes, wall_s=wall_s)))
