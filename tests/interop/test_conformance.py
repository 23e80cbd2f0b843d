"""The MCP conformance suite against a real server process over HTTP matches docs/interop.md."""

from __future__ import annotations

import pytest

from tests.interop.conformance import SERVER_MODULE, SUITE_PACKAGE, SUITE_VERSION, documented, measure

# The first run installs Node 22 and the suite with npm, which takes longer than a usual test.
pytestmark = [pytest.mark.scenario, pytest.mark.timeout(900)]


def test_the_conformance_results_match_the_documented_table() -> None:
    suite, results = measure()
    facts, rows = documented()
    assert facts == {
        "suite": f"{SUITE_PACKAGE}@{SUITE_VERSION}",
        "node": suite.node_version(),
        "server": f"python -m {SERVER_MODULE} --http 127.0.0.1:0",
    }
    assert {scenario: "pass" if passed else "fail" for scenario, passed in results.items()} == {
        row.scenario: row.result for row in rows
    }
    assert [row.scenario for row in rows if row.result == "fail" and not row.why] == []
