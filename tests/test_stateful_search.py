"""Row 1.11's stateful differential search (checks/judge/sequences.py): what it finds, and which row it charges
(checks/judge/deviations.py).

The student's scaler runs in this process here (``harness.run_scaler_ops`` with the class itself): the search's
logic, not the sandbox, is under test.  The grader's verdicts on the catalogue are tests/test_catalogue.py's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import checks.plugin  # noqa: F401 - the grading profile: derandomized, as in the grader and the public checks
from autograder.engine import rubric
from checks.judge import behaviours, cases, deviations, sequences
from checks.runners import harness
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "catalogue"))
import catalogue  # noqa: E402

ENTRIES = {entry.name: entry for entry in catalogue.ENTRIES}


class InProcess:
    """A ``student`` whose scaler runs here: the class of one submission's loss_scaler.py."""

    def __init__(self, folder: Path) -> None:
        name = f"stateful_{folder.name.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(name, folder / "loss_scaler.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        self.scaler = module.ToyLossScaler

    def run(self, scenario: str, args: dict[str, Any]) -> list[Any]:
        assert scenario == "scaler_ops"
        return harness.run_scaler_ops(args, self.scaler)


def submission(name: str, tmp_path: Path) -> InProcess:
    return InProcess(catalogue.materialize(ENTRIES[name], tmp_path / name))


def first_kind(args: dict[str, Any], student: InProcess) -> tuple[int | None, str | None, list[Any]]:
    expected, got = cases.torch_results(args), student.run("scaler_ops", args)
    index = sequences.first_difference(args, expected, got)
    return index, None if index is None else deviations.kind(args, expected, got, index), got


def test_every_kind_is_charged_to_a_task_1_row() -> None:
    task1 = {item.test for item in rubric.ITEMS if item.task == "scaler"}
    assert set(deviations.ROWS.values()) <= task1
    assert {kind for kind, test in deviations.ROWS.items() if test == deviations.DIFFERENTIAL} == {
        "reciprocal", "groups", "restored", "new_scale_tensor", "other"}


@pytest.mark.parametrize("public", [True, False], ids=["public", "hidden"])
def test_the_solution_matches_torch_on_every_sequence(public: bool) -> None:
    behaviours.differential_search(InProcess(ROOT / "solutions"), sequences.call_sequences(public=public),
                                   10 if public else 100)


def test_a_tracker_restored_above_the_interval_keeps_counting(tmp_path: Path) -> None:
    """The issue's example: from tracker 5, interval 3, torch gives (8.0, 6); growing at >= gives (16.0, 0)."""
    args = {"world": cases.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {}},
                    {"op": "load_state_dict", "state": {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                                        "growth_interval": 3, "_growth_tracker": 5}},
                    {"op": "grads", "opt": 0, "values": [[1.0]]}, {"op": "step", "opt": 0}, {"op": "update"},
                    {"op": "observe"}]}
    assert cases.torch_results(args)[-1] == {"ok": {"scale": 8.0, "tracker": 6}}
    index, kind, got = first_kind(args, submission("growth_at_or_above_interval", tmp_path))
    assert (index, kind, got[-1]) == (5, "restored", {"ok": {"scale": 16.0, "tracker": 0}})
    assert deviations.ROWS[kind] == deviations.DIFFERENTIAL


def test_dividing_by_a_scale_of_3_is_one_rounding_off(tmp_path: Path) -> None:
    args = {"world": cases.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": 3.0}},
                    {"op": "grads", "opt": 0, "values": [[265.0438232421875]]}, {"op": "unscale_", "opt": 0}]}
    assert cases.torch_results(args)[-1]["ok"]["grads"] == [[88.34794616699219]]  # times float32(1/3)
    index, kind, got = first_kind(args, submission("div_by_scale_tensor", tmp_path))
    assert (index, kind, got[-1]["ok"]["grads"]) == (2, "reciprocal", [[88.34793853759766]])  # divided by 3


@pytest.mark.parametrize("name", ["div_by_scale_tensor", "unscale_in_float64", "growth_at_or_above_interval",
                                  "load_state_dict_clamps_tracker", "new_scale_tensor_ignored"])
def test_the_search_charges_what_no_other_row_reaches(name: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="This is the shortest sequence found where yours differs"):
        behaviours.differential_search(submission(name, tmp_path), sequences.call_sequences(), 100)


@pytest.mark.parametrize("name", ["unscale_multiplies_by_scale", "backoff_divides", "scale_tuple_becomes_list",
                                  "load_state_dict_drops_tracker", "nan_ignored"])
def test_the_search_leaves_another_rows_mistake_to_that_row(name: str, tmp_path: Path) -> None:
    """These differ from torch (the search finds them), but the first differing call is another row's behaviour."""
    student = submission(name, tmp_path)
    found: list[Any] = []
    original = deviations.charged

    def recording(*args: Any) -> str:
        found.append(original(*args))
        return found[-1]

    deviations.charged, saved = recording, deviations.charged
    try:
        behaviours.differential_search(student, sequences.call_sequences(), 100)
    finally:
        deviations.charged = saved
    assert found and found[0] != deviations.DIFFERENTIAL
    assert rubric.BY_TEST[found[0]].number in ENTRIES[name].must_fail


# --------------------------------------------------------------------------- a search that remembers its draws


def _scenario_failure(student: Any) -> tuple[str, list[str]]:
    """The search's failure, and every call the student's scaler answered (in order)."""
    asked: list[str] = []
    run = student.run
    student.run = lambda scenario, args: asked.append(json.dumps(args)) or run(scenario, args)
    try:
        with pytest.raises(AssertionError) as failed:
            behaviours.scenario_search(student, 100)
    finally:
        student.run = run
    return str(failed.value), asked


@pytest.mark.parametrize("name", ["only_first_grad_checked", "nan_ignored", "backoff_per_overflowing_grad"])
def test_a_search_after_one_that_found_nothing_finds_and_shrinks_the_same(name: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The draws a search that found nothing made are tried first in the next search of that name; a mistake among
    them sends it to hypothesis's own search, which finds and shrinks it exactly as a first search does, asking the
    student's scaler exactly what a first search asks."""
    monkeypatch.setattr(behaviours, "_DRAWN", {})
    student = submission(name, tmp_path)
    first = _scenario_failure(student)  # nothing remembered: hypothesis draws and shrinks
    behaviours.scenario_search(InProcess(ROOT / "solutions"), 100)  # finds nothing: its draws are remembered
    assert len(behaviours._DRAWN[("scenario_search", 100)]) == 100
    assert _scenario_failure(student) == first


def test_a_search_that_found_nothing_before_draws_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second search of a correct scaler asks hypothesis for nothing, and tries every draw the first made."""
    monkeypatch.setattr(behaviours, "_DRAWN", {})
    solution = InProcess(ROOT / "solutions")
    behaviours.scenario_search(solution, 100)
    tried: list[Any] = []
    original = behaviours.matches_torch
    monkeypatch.setattr(behaviours, "find", lambda *args, **kwargs: pytest.fail("hypothesis was asked to draw"))
    monkeypatch.setattr(behaviours, "matches_torch", lambda *args: tried.append(args[1:]) or original(*args))
    behaviours.scenario_search(solution, 100)
    drawn = [(scenario, powers_of_two) for powers_of_two, scenario in behaviours._DRAWN[("scenario_search", 100)]]
    assert json.dumps(tried) == json.dumps(drawn) and len(tried) == 100  # (NaN among them: never equal to itself)
