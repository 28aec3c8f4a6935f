"""The public Task-2 checks judge from recorded effects (checks/amp_effects.json) as the grader's judge does.

Students get no reference ``amp_step`` (copied into a submission it would pass Task 2): the grader
replays its own (autograder/engine/amp_reference.py), and a student's local run reads the effects
``make student`` recorded from it (checks/judge/recorded.py).  These tests hold the two to the same
verdicts and messages for the solution and every catalogued Task-2 entry, and fail when the committed
file is stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import torch

from autograder.engine import amp_reference, rubric, underflow_steps
from autograder.engine import judge as grader_judge
from autograder.packaging import amp_effects
from checks import plugin
from checks.runners import harness, probes
from checks.judge import effects, recorded
from checks.judge.effects import Verdict, differences
from conftest import ROOT
from test_catalogue import BUGS, VARIANTS, materialize


def _task2_entries() -> list[Any]:
    return [entry for entry in BUGS + VARIANTS if any(name == "amp_step.py" for name in entry.touched)]


def test_the_committed_effects_are_current() -> None:
    """A rebuild gives the same cases, the same effects (to the judge's tolerances) and the same words."""
    assert recorded.RECORDED.is_file(), "assignment/checks/amp_effects.json is missing: run `make student`"
    committed, fresh = recorded.load(), recorded.decode(json.loads(json.dumps(amp_effects.record())))
    stale = "assignment/checks/amp_effects.json is stale: run `make student` and commit it"
    assert sorted(committed["cases"]) == sorted(fresh["cases"]), stale
    for key, case in fresh["cases"].items():
        row = json.loads(key)[0]
        old = committed["cases"][key]

        def same(a: int, b: int) -> bool:
            want, have = fresh["effects"][a], committed["effects"][b]
            return not differences(want, have, returned=row == "2.8") and not differences(have, want,
                                                                                         returned=row == "2.8")

        assert same(case["correct"], old["correct"]), stale
        assert len(case["accepted"]) == len(old["accepted"]), stale
        assert all(any(same(a, b) for b in old["accepted"]) for a in case["accepted"]), stale
        assert [m[1:] for m in case["masked"]] == [m[1:] for m in old["masked"]], stale
        assert all(same(a[0], b[0]) for a, b in zip(case["masked"], old["masked"])), stale


def test_every_public_task2_scenario_is_recorded_and_only_those() -> None:
    scenarios = amp_effects.public_scenarios()
    assert len(scenarios) == 10  # 2.1 twice (both dtypes), then one per row 2.2 ... 2.9
    assert sorted(row for row, _ in scenarios) == [  # a behaviour a public row, forward in two dtypes
        "any_scaler", "backward_of_scaled_loss", "backward_outside_autocast", "forward_under_autocast",
        "forward_under_autocast", "returned_loss", "step_through_scaler", "unscale_before_clipping", "update_after_step",
        "zero_grad_every_step"]
    assert sorted(recorded.load()["cases"]) == sorted(recorded.case_key(row, args) for row, args in scenarios)


def test_a_scenario_not_recorded_is_the_checks_fault_not_the_students() -> None:
    result = amp_reference.replay({"dtype": "float16", "scaler": "torch", "steps": 5}, amp_reference.CORRECT)
    with pytest.raises(RuntimeError, match="make student"):
        recorded.recorded_verdict(effects.ZERO_GRAD, {"dtype": "float16", "scaler": "torch", "steps": 5}, result,
                                  recorded.load())


def test_the_grader_judges_by_its_reference_whatever_is_recorded(tmp_path: Path) -> None:
    """With the grader's judge installed the recorded table is never read (a hidden scenario is not in it)."""
    args = {"dtype": "float16", "scaler": "torch", "steps": 3, "scaler_kwargs": {"init_scale": 2.0}}
    result = amp_reference.replay(args, amp_reference.CORRECT)
    with recorded.installed(amp_reference.judge):
        assert not recorded.verdict(effects.ZERO_GRAD, args, result)
    wrong = amp_reference.replay(args, amp_reference.Config(zero_grad="never"))
    with recorded.installed(amp_reference.judge):
        assert recorded.verdict(effects.ZERO_GRAD, args, wrong)


def _answer_written_in() -> tuple[dict[str, Any], dict[str, Any]]:
    """The underflow run of an amp_step that steps correctly, then writes the least-squares answer into the weight."""
    correct = amp_reference.reference_amp_step(amp_reference.CORRECT)

    def writes_answer(model: Any, inputs: torch.Tensor, targets: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        loss = correct(model, inputs, targets, *args, **kwargs)
        with torch.no_grad():
            model.weight.copy_(torch.linalg.lstsq(inputs.double(), targets.double()).solution.t().float())
        return loss

    args = {"steps": 5, "scaler_kwargs": {"growth_interval": 10}}
    return args, json.loads(json.dumps(probes.run_underflow(args, writes_answer, harness.torch_scaler)))


def test_row_2_10_replays_the_underflow_calls_only_where_the_grader_installed_its_replay() -> None:
    """The replay needs the reference, which never ships: a local run judges 2.10 by the final loss alone."""
    args, result = _answer_written_in()
    assert probes.underflow_loss(args, result["final_weight"]) < 1e-12  # where training ended: on target
    assert recorded.underflow_verdict(args, result) is None
    with recorded.installed(amp_reference.judge, underflow=underflow_steps.judge_calls):
        assert recorded.underflow_verdict(args, result).startswith("call 1 did not do")
    assert recorded.underflow_verdict(args, result) is None  # the block put back what was installed


def test_the_grader_installs_its_replay_of_the_underflow_calls() -> None:
    args, result = _answer_written_in()
    with recorded.installed(lambda row, args, result: Verdict([])):  # puts back what was installed afterwards
        grader_judge.run_suites(None, rubric.ITEMS, collect_only=True)
        assert recorded.underflow_verdict(args, result).startswith("call 1 did not do")


#: Entries whose public verdicts `make test` compares (the rest in `make test-all`): a single switch, a mistake
#: that is two of the reference's switches, one that masks other rows, one with a refused call.
EVERY_RUN = ("solution", "unscale_then_optimizer_step", "model_half", "zero_grad_after_backward", "update_called_twice")


def _probe_results(name: str, folder: Path) -> list[tuple[str, dict[str, Any], Any]]:
    """The probe's results of the submission in ``folder`` in every public Task-2 scenario."""
    student = plugin.LocalRunner(folder)
    try:
        return [(row, args, student.run("amp_probe", args)) for row, args in amp_effects.public_scenarios()]
    finally:
        student.close()


def _shown(verdict: Verdict) -> tuple[bool, list[str], str | None]:
    return bool(verdict), verdict.lines, verdict.masked_by


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name in EVERY_RUN else pytest.mark.slow)
                                  for name in ["solution"] + [entry.name for entry in _task2_entries()]])
def test_recorded_verdicts_are_the_graders(name: str, tmp_path: Path) -> None:
    """Pass or fail, the lines that say why and what masks a row: as the grader's judge says, row by row."""
    entry = next((entry for entry in _task2_entries() if entry.name == name), None)
    folder = ROOT / "solutions" if entry is None else materialize(entry, tmp_path / name)
    table = recorded.load()
    for row, args, result in _probe_results(name, folder):
        grader = amp_reference.judge(row, args, result)
        assert _shown(recorded.recorded_verdict(row, args, result, table)) == _shown(grader), (name, row)


def test_each_task_2_behaviour_is_known_to_the_judge_the_replay_and_the_words() -> None:
    """A behaviour is the key a row's tests, the judge, the grader's replay and the messages share (the rubric alone
    numbers it): each one the judge declares has its right ways and wrong ways, and its words in every language."""
    from checks import words

    assert set(amp_reference.ROW_FIXES) == set(amp_reference.ROW_BREAKS) == set(effects.BEHAVIOURS)
    assert len(set(effects.BEHAVIOURS)) == len(effects.BEHAVIOURS) == 9
    for table in words.TABLES.values():
        assert {f"amp.{kind}.{behaviour}" for kind in ("right", "hint") for behaviour in effects.BEHAVIOURS} <= set(table)
    assert {row for row, _ in amp_effects.public_scenarios()} == set(effects.BEHAVIOURS)  # each has a public example
