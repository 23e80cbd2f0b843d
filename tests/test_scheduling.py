"""The suite's collection order puts the longest files first (see tests/scheduling.py)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

_CONFTEST = """
import pytest
from tests.scheduling import pytest_collection_modifyitems
"""
_INI = """
[pytest]
markers =
    scenario: starts real processes
    timeout(seconds): a test's time limit
"""


def test_scenario_files_come_first_longest_declared_timeout_then_most_scenarios(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(_INI)
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(
        test_a_units="def test_one(): pass\ndef test_two(): pass\ndef test_three(): pass\n",
        test_b_two_scenarios=(
            "import pytest\npytestmark = pytest.mark.scenario\n"
            "def test_first(): pass\ndef test_second(): pass\n"
        ),
        test_c_one_scenario="import pytest\n@pytest.mark.scenario\ndef test_only(): pass\n",
        test_d_long_scenario=(
            "import pytest\npytestmark = pytest.mark.scenario\n"
            "def test_short(): pass\n@pytest.mark.timeout(900)\ndef test_corpus(): pass\n"
        ),
        test_e_mixed=(
            "import pytest\ndef test_unit(): pass\n"
            "@pytest.mark.scenario\n@pytest.mark.timeout(300)\ndef test_kills(): pass\n"
        ),
    )
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    collected = [line for line in result.outlines if "::" in line]
    assert collected == [
        "test_d_long_scenario.py::test_short",
        "test_d_long_scenario.py::test_corpus",
        "test_e_mixed.py::test_unit",
        "test_e_mixed.py::test_kills",
        "test_b_two_scenarios.py::test_first",
        "test_b_two_scenarios.py::test_second",
        "test_c_one_scenario.py::test_only",
        "test_a_units.py::test_one",
        "test_a_units.py::test_two",
        "test_a_units.py::test_three",
    ]
