"""Each hidden property test explores as many examples as finding bugs needs, with the stated margin, and no fewer.

The measurement (``make example-counts``: every catalogued bug and a sample of mutants graded at each count of a
ladder) is recorded in docs/example-counts.json; autograder/engine/examples.py sets the counts by hand from it.
A count below ``MARGIN`` times a test's measured need (or below the floor of 25, the public checks' own) fails
here, and so does a property test nobody measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.engine import examples
from conftest import ROOT

MEASURED = json.loads((ROOT / "docs" / "example-counts.json").read_text())


def test_the_measurement_covered_the_whole_ladder_and_every_property_test() -> None:
    assert MEASURED["ladder"][-1] == examples.CEILING == 100  # the top rung is what every test explored before
    # A count below 100 comes from a measurement; a property test nobody measured yet (a new row's) explores 100.
    assert set(examples.COUNTS) <= set(MEASURED["tests"]) <= set(examples.property_tests())
    assert MEASURED["submissions"] >= 66 + 60  # the catalogue's bugs and the mutation sample


@pytest.mark.parametrize("test", sorted(MEASURED["tests"]))
def test_each_count_keeps_its_margin_above_the_measured_need(test: str) -> None:
    need = MEASURED["tests"][test]["need"]
    assert (examples.MARGIN, examples.FLOOR, examples.CEILING) == (2, 25, 100)
    least = max(min(examples.MARGIN * need, examples.CEILING), examples.FLOOR)
    assert least <= examples.COUNTS[test] <= examples.CEILING, (
        f"{test}: {examples.COUNTS[test]} examples, but it needs {need} to catch what it catches with 100")


def test_the_count_a_run_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMP_HIDDEN_EXAMPLES", raising=False)
    assert examples.count_for("test_update_rule_properties") == examples.COUNTS["test_update_rule_properties"]
    assert examples.count_for("test_a_new_property_nobody_measured") == 100
    monkeypatch.setenv("AMP_HIDDEN_EXAMPLES", "7")
    assert examples.count_for("test_update_rule_properties") == 7
