"""The grader on the bundled examples: full marks, zero, partial; rubric; determinism; feedback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from autograder.engine import judge, rubric
from conftest import ROOT, grade, load_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402 - tests/hostile: the hidden-code markers shared with the hostile suite


def rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["number"]: test for test in results["tests"] if test.get("max_score")}


def test_solution_gets_full_marks(graded_examples: dict[str, dict[str, Any]]) -> None:
    results = graded_examples["solutions"]
    failed = {n: t["output"][:400] for n, t in rows(results).items() if t["score"] != t["max_score"]}
    assert failed == {}
    assert results["score"] == rubric.max_points() == 90


def test_skeleton_gets_zero_with_not_implemented_messages(graded_examples: dict[str, dict[str, Any]]) -> None:
    """Each stub is named once at the top; each row it fails says so in one line (not a check's page per case)."""
    results = graded_examples["assignment"]
    assert results["score"] == 0
    assert results["output"] == ("About your submission:\n- Not implemented yet: ToyLossScaler.__init__ (Task 1), "
                                 "amp_step (Task 2). The tests that use them score 0.")
    expected = {"1": "ToyLossScaler.__init__ is not implemented yet (see Task 1 in README.md).",
                "2": "amp_step is not implemented yet (see Task 2 in README.md)."}
    for number, test in rows(results).items():
        assert test["score"] == 0, number
        task = number.split(".")[0]
        if task in expected:
            assert test["output"] == expected[task], (number, test["output"][:300])
        else:
            assert test["output"] == f'Q{number[2]} is unanswered in answers.py (set Q{number[2]} = "A", "B", "C" or "D").'


def test_partially_correct_example_loses_exactly_its_bugs(graded_examples: dict[str, dict[str, Any]]) -> None:
    results = graded_examples["partially_correct"]
    failed = {n for n, t in rows(results).items() if t["score"] < t["max_score"]}
    # isinf-only detection (NaN missed), growth to inf, backward inside autocast, two wrong answers.
    # One cause, one deduction: each bug costs its own row (and 1.11, the comparison with torch), nothing else.
    assert failed == {"1.8", "1.11", "1.12", "2.2", "3.2", "3.5"}
    assert 40 <= results["score"] < 90
    assert "backward pass ran inside torch.autocast" in rows(results)["2.2"]["output"]


def test_feedback_never_contains_hidden_test_source(graded_examples: dict[str, dict[str, Any]]) -> None:
    """No line of hidden test code in anything the three examples' results show (the two with failures are the
    ones whose tracebacks could carry it)."""
    markers = hostile.hidden_markers()
    assert len(markers) > 50  # the whole code of the hidden suites, not a couple of patterns
    text = "\n".join(s for results in graded_examples.values() for s in hostile.strings_in(results))
    leaked = sorted(marker for marker in markers if marker in text)
    assert leaked == [], leaked[:20]


def test_results_are_byte_identical_across_runs(tmp_path: Path, graded_examples: dict[str, dict[str, Any]]) -> None:
    done = grade([ROOT / "examples" / "partially_correct"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    again = load_results(tmp_path, "partially_correct")
    first = dict(graded_examples["partially_correct"])
    for data in (first, again):
        data.pop("execution_time")
    assert json.dumps(again, sort_keys=True) == json.dumps(first, sort_keys=True)
    csv_text = (tmp_path / "gradebook.csv").read_text().splitlines()
    assert csv_text[0].startswith("submission,score,max_score,status,1.1 ")
    assert csv_text[1].startswith(f"partially_correct,{again['score']:g}".replace(".0,", ",")) or \
        csv_text[1].startswith(f"partially_correct,{again['score']}")


def test_every_graded_test_has_exactly_one_rubric_item() -> None:
    from checks.runners import harness  # noqa: F401 - makes `checks` importable for collection

    collected = judge.run_suites(None, rubric.ITEMS + rubric.GPU_ITEMS, collect_only=True)
    names = {item.test for item in rubric.ITEMS + rubric.GPU_ITEMS}
    assert collected == names
    numbers = [item.number for item in rubric.ITEMS + rubric.GPU_ITEMS]
    assert len(numbers) == len(set(numbers))
    assert rubric.max_points() + rubric.GPU_PART_POINTS == 100
    public = {item.test for item in rubric.ITEMS if item.suite == rubric.PUBLIC}
    shipped = "".join(p.read_text() for p in (ROOT / "assignment" / "checks").glob("test_*.py"))
    assert all(f"def {name}(" in shipped for name in public)
    assert all(item.visibility == "visible" for item in rubric.ITEMS if item.suite == rubric.PUBLIC)


def test_cli_rejects_missing_paths_without_a_traceback(tmp_path: Path) -> None:
    done = grade([tmp_path / "nope"], tmp_path / "out")
    assert done.returncode == 2 and "no such file" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()


@pytest.mark.parametrize("passed", [0, 1, 2])
def test_parametrized_cases_share_the_points(passed: int) -> None:
    item = next(i for i in rubric.ITEMS if i.test == "test_amp_step_forward_under_autocast")
    outcomes = [judge.Outcome(item.test, f"{item.test}[{d}]", i < passed, "" if i < passed else "no autocast")
                for i, d in enumerate(["bfloat16", "float16"])]
    [row], _ = judge.score(outcomes, (item,))
    assert row.score == pytest.approx(item.points * passed / 2)
    assert ("no autocast" in row.message) == (passed < 2)


def test_a_case_label_is_not_doubled_when_the_message_names_it() -> None:
    item = next(i for i in rubric.ITEMS if i.test == "test_amp_step_forward_under_autocast")
    outcomes = [judge.Outcome(item.test, f"{item.test}[float16]", False, "float16: no autocast"),
                judge.Outcome(item.test, f"{item.test}[bfloat16]", False, "no autocast at all")]
    [row], _ = judge.score(outcomes, (item,))
    assert row.message == "float16: no autocast\n\n[bfloat16] no autocast at all"


def test_a_row_shows_its_first_failing_case_in_full_and_the_others_in_one_line() -> None:
    """Cases of one row fail for the same behaviour: the first in full, each other by its first line of its own."""
    item = rubric.BY_TEST["test_amp_step_unscales_before_clipping"]
    full = "We called\n    amp_step(..., max_grad_norm={norm})\nthe effects differ:\n    grads differ\nHint: unscale first."
    outcomes = [judge.Outcome(item.test, f"{item.test}[{norm}]", False, full.format(norm=norm))
                for norm in ("0.001", "0.01")]
    outcomes.append(judge.Outcome(item.test, f"{item.test}[0.1]", False, "We called\nthe effects differ:"))
    [row], _ = judge.score(outcomes, (item,))
    assert row.message == ("[0.001] " + full.format(norm="0.001") + "\n\n[0.01] `amp_step(..., max_grad_norm=0.01)`"
                           " … Hint: unscale first.\n\n[0.1] fails the same way")  # a whole sentence, its outcome too


def test_the_likely_mistake_line_comes_before_the_failure() -> None:
    from autograder.engine import results

    item = rubric.BY_TEST["test_amp_step_unscales_before_clipping"]
    row = judge.Row(item, 0.0, "the effects differ", False)
    assert results._row_output(row, "Likely mistake: clipping first.") == \
        "Likely mistake: clipping first.\n\nthe effects differ"


def test_rows_are_listed_in_rubric_order() -> None:
    numbers = [tuple(int(part) for part in item.number.split(".")) for item in rubric.ITEMS]
    assert numbers == sorted(numbers)


def test_public_part_of_a_hidden_row_is_its_public_cases_alone() -> None:
    """score() keeps a hidden row's failed public cases apart; with_public_parts shows only those, pointless."""
    from autograder.engine import results

    item = rubric.BY_TEST["test_amp_step_unscales_before_clipping"]
    assert item.visibility == "after_due_date"
    outcomes = [judge.Outcome(item.test, f"{item.test}[1.0]", False, "public: clipped scaled grads", public=True),
                judge.Outcome(item.test, f"{item.test}[0.5]", False, "hidden: max_norm=0.5 input", public=False),
                judge.Outcome(item.test, f"{item.test}[2.0]", True, public=True)]
    rows, _ = judge.score(outcomes, (item,))
    assert rows[0].score == 1.0 and rows[0].public_failures == "[1.0] public: clipped scaled grads"
    data = results.with_public_parts(results.gradescope_results(judge.Report(rows=rows), "alice"))
    names = [t["name"] for t in data["tests"]]
    part = data["tests"][names.index(names[0]) + 1]
    assert part["visibility"] == "visible" and part["score"] == part["max_score"] == 0.0
    assert "public: clipped" in part["output"] and "hidden: max_norm=0.5" not in part["output"]
    # a public row, or a hidden row whose public cases pass, gets no companion
    passing = [judge.Outcome(item.test, "a", True, public=True), judge.Outcome(item.test, "b", False, "h")]
    rows, _ = judge.score(passing, (item,))
    assert len(results.with_public_parts(results.gradescope_results(judge.Report(rows=rows)))["tests"]) == 2
    public_item = rubric.BY_TEST["test_amp_step_forward_under_autocast"]
    rows, _ = judge.score([judge.Outcome(public_item.test, "a", False, "x", public=True)], (public_item,))
    assert len(results.with_public_parts(results.gradescope_results(judge.Report(rows=rows)))["tests"]) == 2
