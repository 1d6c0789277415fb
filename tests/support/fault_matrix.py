"""The fault matrix's verdicts, kept while it runs and printed as a table at the end of the run."""

from __future__ import annotations

from tests.support.hostile import FAULTS, POINTS

__all__ = ["RESULTS", "fault_table"]

RESULTS: dict[tuple[str, str], bool] = {}  # (fault name, point) -> survived


def fault_table() -> list[str]:
    """The matrix as text lines: faults down, states across, survived/tried per cell."""
    if not RESULTS:
        return []
    states = list(dict.fromkeys(state for state, _t in POINTS.values()))
    width = max(len(f.name) for f in FAULTS) + 2
    lines = ["fault matrix (survived/tried):", "".ljust(width) + "".join(s.ljust(20) for s in states)]
    for fault in FAULTS:
        cells = []
        for state in states:
            points = [p for p, (s, _t) in POINTS.items() if s == state and (fault.name, p) in RESULTS]
            good = sum(RESULTS[(fault.name, p)] for p in points)
            cells.append(f"{good}/{len(points)}".ljust(20))
        lines.append(fault.name.ljust(width) + "".join(cells))
    total = len(RESULTS)
    lines.append(f"total: {sum(RESULTS.values())} of {total} faults survived")
    return lines
