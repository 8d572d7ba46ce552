"""Prints every figure the quality gate measured at the end of the run."""
from __future__ import annotations

from tests.quality.gate import REPORT


def pytest_terminal_summary(terminalreporter) -> None:
    if REPORT:
        terminalreporter.section("retrieval quality gate (floors: tests/quality/floors.py)")
        for line in REPORT:
            terminalreporter.write_line(line)
