"""Pins of what the grader ships, written by hand: a fault that keeps every other test green fails here.

Each number, name and word below is copied by hand from the shipped grader (never read from the code under
test), so an edit that moves points between rows, shows a hidden row at once, loosens the differential row's
tolerances, cuts the hidden suite's examples, raises the per-call limit or swaps two bugs' words fails one of
these tests.  Changing one of them on purpose means changing its pin here too.

Values that depend on the environment (``AMP_HIDDEN_VISIBILITY``, ``AMP_GPU_POINTS``, ``AMP_HIDDEN_EXAMPLES``,
``AMP_SANDBOX_LIMITS``) are read in a fresh Python with every ``AMP_*`` variable removed: the shipped defaults.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from autograder.diagnosis import words
from autograder.engine import judge, results, rubric
from autograder.sandbox import budget, runner as sandbox, zygote
from checks.words import MISTAKES
from checks.judge import behaviours, expect, cases
from conftest import ROOT

#: (number, test function, points, suite) of every CPU row, in the rubric's order (90 points).
CPU_ROWS: list[tuple[str, str, float, str]] = [
    # Task 1: ToyLossScaler (50); row 1.17 is gone and its number is not reused
    ("1.1", "test_constructor_rejects_bad_arguments", 3, "public"),
    ("1.2", "test_scale_returns_float32_without_overflow", 3, "public"),
    ("1.3", "test_unscale_divides_grads_in_place", 3, "public"),
    ("1.4", "test_step_is_skipped_on_inf_or_nan", 3, "public"),
    ("1.5", "test_update_backs_off_after_inf_or_nan", 4, "public"),
    ("1.6", "test_update_rule_properties", 5, "hidden"),
    ("1.7", "test_update_rule_non_power_of_two_factors", 3, "hidden"),
    ("1.8", "test_growth_skipped_when_float32_would_overflow", 2, "hidden"),
    ("1.9", "test_update_new_scale_keeps_tracker", 2, "hidden"),
    ("1.10", "test_one_backoff_per_update", 3, "hidden"),
    ("1.11", "test_matches_torch_gradscaler", 9, "hidden"),
    ("1.12", "test_unscale_bit_exact", 2, "hidden"),
    ("1.13", "test_misuse_raises_runtime_error", 3, "hidden"),
    ("1.14", "test_float16_grads_rejected", 1, "hidden"),
    ("1.15", "test_scale_lists_and_tuples", 1, "hidden"),
    ("1.16", "test_state_dict_round_trip", 2, "hidden"),
    ("1.18", "test_defaults_and_restored_state", 1, "hidden"),
    # Task 2: amp_step (30)
    ("2.1", "test_amp_step_forward_under_autocast", 4, "public"),
    ("2.2", "test_amp_step_backward_outside_autocast", 3, "public"),
    ("2.3", "test_amp_step_backward_sees_scaled_loss", 3, "public"),
    ("2.4", "test_amp_step_zeroes_grads_every_step", 3, "hidden"),
    ("2.5", "test_amp_step_steps_through_scaler", 4, "hidden"),
    ("2.6", "test_amp_step_updates_once_after_step", 3, "hidden"),
    ("2.7", "test_amp_step_unscales_before_clipping", 3, "hidden"),
    ("2.8", "test_amp_step_returns_unscaled_detached_loss", 2, "hidden"),
    ("2.9", "test_amp_step_works_with_both_scalers", 2, "hidden"),
    ("2.10", "test_underflow_training_converges", 3, "hidden"),
    # Task 3: Quick Check (10)
    ("3.1", "test_quick_check_q1", 2, "hidden"),
    ("3.2", "test_quick_check_q2", 2, "hidden"),
    ("3.3", "test_quick_check_q3", 2, "hidden"),
    ("3.4", "test_quick_check_q4", 2, "hidden"),
    ("3.5", "test_quick_check_q5", 2, "hidden"),
]
#: The GPU part's rows: shares 0.5, 0.3 and 0.2 of its 10 points, all public.
GPU_ROWS: list[tuple[str, str, float, str]] = [
    ("4.1", "test_gpu_amp_reaches_fp32_loss_sooner", 5, "public"),
    ("4.2", "test_gpu_underflow_needs_the_scaler", 3, "public"),
    ("4.3", "test_gpu_toy_scaler_matches_cuda_gradscaler", 2, "public"),
]
#: Gradescope's visibility of each suite as shipped.
VISIBILITY = {"public": "visible", "hidden": "after_due_date"}

SHIPPED_DEFAULTS = """
import json, sys
sys.path.insert(0, "assignment")
from hypothesis import settings
import checks.plugin  # loads the public checks' "grading" profile
from autograder.engine import examples, rubric
from autograder.sandbox import budget, zygote
rows = [[i.number, i.test, i.points, i.suite, i.visibility, i.task] for i in rubric.ITEMS + rubric.GPU_ITEMS]
print(json.dumps({"rows": rows, "hidden_examples": {t: examples.count_for(t) for t in examples.property_tests()},
                  "public_examples": settings.get_profile("grading").max_examples,
                  "limits": vars(zygote.default_limits()), "call_seconds": budget.CALL_SECONDS}))
"""


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    """The environment-dependent values as shipped: read in a fresh Python without any ``AMP_*`` variable."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMP_")}
    done = subprocess.run([sys.executable, "-c", SHIPPED_DEFAULTS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


# --------------------------------------------------------------------------- 1, 2: the rubric's rows


def test_every_cpu_row_is_pinned() -> None:
    got = [(item.number, item.test, item.points, item.suite) for item in rubric.ITEMS]
    assert got == CPU_ROWS
    assert sum(points for _, _, points, _ in CPU_ROWS) == 90 and rubric.max_points() == 90
    assert "1.17" not in {item.number for item in rubric.ITEMS + rubric.GPU_ITEMS}


def test_points_per_task_are_pinned() -> None:
    per_task: dict[str, float] = {}
    for item in rubric.ITEMS:
        per_task[item.task] = per_task.get(item.task, 0) + item.points
    assert per_task == {"scaler": 50, "amp_step": 30, "quick_check": 10}
    assert [item.number for item in rubric.ITEMS if item.task == "scaler" and item.suite == "public"] == \
        ["1.1", "1.2", "1.3", "1.4", "1.5"]
    assert [item.number for item in rubric.ITEMS if item.task == "amp_step" and item.suite == "public"] == \
        ["2.1", "2.2", "2.3"]


def test_the_readme_points_table_is_pinned() -> None:
    """The README's table (written from the rubric by ``python -m autograder rubric --readme``), line by line."""
    from autograder.engine import rubric_readme

    assert rubric_readme.table().splitlines()[3:6] == [
        "| Task 1 `ToyLossScaler` | 50 | 5 public rows (16 pts) + 12 hidden rows, each with a public example |",
        "| Task 2 `amp_step` | 30 | 3 public rows (10 pts) + 7 hidden rows, each with a public example |",
        "| Task 3 Quick Check | 10 | 5 hidden (answer key only in the hidden suite) |",
    ]


def test_shipped_rows_points_and_visibility(shipped: dict[str, Any]) -> None:
    """As shipped (no AMP_* variable): every row's number, test, points, suite and Gradescope visibility."""
    want = [[number, test, points, suite, VISIBILITY[suite]] for number, test, points, suite in CPU_ROWS + GPU_ROWS]
    assert [row[:5] for row in shipped["rows"]] == want
    assert [row[5] for row in shipped["rows"][-3:]] == ["gpu", "gpu", "gpu"]
    assert sum(row[2] for row in shipped["rows"][-3:]) == 10


@pytest.mark.parametrize("built_by", ["graded", "not graded"])
def test_the_results_show_hidden_rows_after_the_due_date_only(built_by: str) -> None:
    """The rows of a results.json as built for a graded submission (every row passed) and for one that could not
    be graded (the error results)."""
    hidden_visibility = os.environ.get("AMP_HIDDEN_VISIBILITY", "after_due_date")  # the build's switch
    if built_by == "graded":
        report = judge.Report(rows=[judge.Row(item, item.points, "", True) for item in rubric.ITEMS])
        data = results.gradescope_results(report, "solutions")
        assert data["score"] == 90
    else:
        data = results.error_results("could not be graded")
    built = {row["number"]: row for row in data["tests"]}
    assert built["1.11"]["visibility"] == hidden_visibility and built["1.11"]["max_score"] == 9
    assert built["2.4"]["visibility"] == hidden_visibility and built["3.1"]["visibility"] == hidden_visibility
    assert built["1.1"]["visibility"] == "visible" and built["2.1"]["visibility"] == "visible"
    for number, _, points, suite in CPU_ROWS:
        assert built[number]["visibility"] == ("visible" if suite == "public" else hidden_visibility), number
        assert built[number]["max_score"] == points, number
    assert built["4"]["visibility"] == "visible" and built["4"]["max_score"] == 0


# --------------------------------------------------------------------------- 3: row 1.11's tolerances


class _Replies:
    """A stand-in for a student process that answers the scenario with hand-written results."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers

    def run(self, kind: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        assert kind == "scaler_ops"
        return self.answers


#: One optimizer with one 2-element parameter: new scaler, read the parameters, observe (scale, tracker).
SCENARIO: dict[str, Any] = {"world": cases.world([[[2]]]),
                            "ops": [{"op": "new", "kwargs": {"init_scale": 3.0}}, {"op": "params", "opt": 0},
                                    {"op": "observe"}]}


def _answers(param: float, scale: float, tracker: int = 0) -> list[dict[str, Any]]:
    return [{"ok": None}, {"ok": [[param, 0.25]]}, {"ok": {"scale": scale, "tracker": tracker}}]


def _judged(monkeypatch: pytest.MonkeyPatch, reference: list[dict[str, Any]], student: list[dict[str, Any]],
            powers_of_two: bool) -> bool:
    """Whether row 1.11's check passes ``student``'s answers against ``reference`` (torch's answers)."""
    monkeypatch.setattr(cases, "torch_results", lambda args: reference)
    try:
        behaviours.matches_torch(_Replies(student), SCENARIO, powers_of_two=powers_of_two)
    except AssertionError as failure:  # how a check fails (expect.fail)
        assert "must behave exactly like torch.amp.GradScaler('cpu')" in str(failure)
        return False
    return True


def test_the_differential_row_rejects_a_scale_just_outside_1e_6(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_answers = _answers(0.5, 3.0)
    # relative error 3.5e-6 / 3.0000035 > 1e-6: a mismatch (a 1e-3 tolerance would pass it)
    assert not _judged(monkeypatch, torch_answers, _answers(0.5, 3.0000035), powers_of_two=False)
    assert not _judged(monkeypatch, torch_answers, _answers(0.5, 2.9999965), powers_of_two=False)
    # 2.5e-6 < 1e-6 * 3.0000025: inside the tolerance
    assert _judged(monkeypatch, torch_answers, _answers(0.5, 3.0000025), powers_of_two=False)
    assert _judged(monkeypatch, torch_answers, _answers(0.5, 3.0), powers_of_two=False)
    # the tracker is an int: compared exactly
    assert not _judged(monkeypatch, torch_answers, _answers(0.5, 3.0, tracker=1), powers_of_two=False)


def test_the_differential_row_rejects_parameters_just_outside_1e_6(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_answers = _answers(0.5, 4.0)
    for powers_of_two in (True, False):
        # 0.5 * (1 + 2e-6): outside 1e-6; 0.5 * (1 + 5e-7): inside
        assert not _judged(monkeypatch, torch_answers, _answers(0.500001, 4.0), powers_of_two)
        assert not _judged(monkeypatch, torch_answers, _answers(0.499999, 4.0), powers_of_two)
        assert _judged(monkeypatch, torch_answers, _answers(0.50000025, 4.0), powers_of_two)


def test_the_differential_row_is_exact_on_the_scale_for_powers_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_answers = _answers(0.5, 4.0)
    assert _judged(monkeypatch, torch_answers, _answers(0.5, 4.0), powers_of_two=True)
    # 5e-7 relative: inside 1e-6, but power-of-two factors give the scale exactly
    assert not _judged(monkeypatch, torch_answers, _answers(0.5, 4.000002), powers_of_two=True)
    assert _judged(monkeypatch, torch_answers, _answers(0.5, 4.000002), powers_of_two=False)


def test_the_comparison_helper_at_1e_6() -> None:
    assert not expect.close(3.0, 3.0000035, rel=1e-6)
    assert expect.close(3.0, 3.0000025, rel=1e-6)
    assert not expect.close(4.0, 4.000002, rel=0.0)
    assert expect.close(math.nan, math.nan) and not expect.close(1.0, math.nan, rel=1e-6)


# --------------------------------------------------------------------------- 4: examples of the hidden suite


#: Examples each hidden property test explores as shipped (autograder/engine/examples.py; measured:
#: docs/example-counts.json, tests/test_example_counts.py).
EXAMPLES = {"test_update_rule_properties": 25, "test_update_rule_non_power_of_two_factors": 25,
            "test_growth_skipped_when_float32_would_overflow": 25, "test_update_new_scale_keeps_tracker": 25,
            "test_one_backoff_per_update": 25, "test_matches_torch_gradscaler": 100, "test_unscale_bit_exact": 100,
            "test_misuse_raises_runtime_error": 25, "test_float16_grads_rejected": 25,
            "test_scale_lists_and_tuples": 25, "test_state_dict_round_trip": 25}


def test_the_hidden_suite_runs_its_examples_as_shipped(shipped: dict[str, Any]) -> None:
    assert shipped["hidden_examples"] == EXAMPLES
    assert shipped["public_examples"] == 25


def test_the_judge_gives_hidden_property_tests_their_examples(tmp_path: Path) -> None:
    """The judge's collection hook: a hidden property test gets its count, a public one keeps its 25."""
    expected = int(os.environ.get("AMP_HIDDEN_EXAMPLES", "100"))  # a test nobody measured: 100 (examples.CEILING)

    def property_test() -> Any:
        @given(st.integers())
        def test_property(value: int) -> None:
            pass
        # what @given keeps when the public checks' profile (25 examples) is loaded at decoration
        test_property._hypothesis_internal_use_settings = settings(max_examples=25)  # type: ignore[attr-defined]
        return test_property

    hidden = SimpleNamespace(obj=property_test(), fspath=judge.HIDDEN_DIR / "test_hidden_scaler.py",
                             name="test_property", originalname="test_property")
    public = SimpleNamespace(obj=property_test(), fspath=ROOT / "assignment" / "checks" / "test_public_scaler.py",
                             name="test_property", originalname="test_property")
    items: list[Any] = [hidden, public]
    judge.JudgePlugin(runner=None, tests={"test_property"}).pytest_collection_modifyitems(items)  # public first
    assert [item.obj._hypothesis_internal_use_settings.max_examples for item in (hidden, public)] == [expected, 25]


# --------------------------------------------------------------------------- 5: limits


def test_the_budget_module_ships_its_numbers() -> None:
    assert budget.SUBMISSION_SECONDS == 300
    assert budget.CALL_SECONDS == 20
    assert budget.IMPORT_SECONDS == 10
    assert budget.MAX_CALL_SECONDS == 120
    assert budget.WATCHDOG_GRACE_SECONDS == 90
    assert budget.watchdog_seconds() == 390


def test_the_sandbox_limits_ship_their_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMP_SANDBOX_LIMITS", raising=False)
    want = {"call_seconds": 20, "import_seconds": 10, "submission_seconds": 300, "hangs_per_module": 3,
            "memory_bytes": 4 * 1024 ** 3, "cpu_seconds": 600, "processes": 64, "file_bytes": 16 * 1024 ** 2,
            "open_files": 256, "max_call_seconds": 120}
    assert vars(zygote.Limits()) == want
    assert vars(zygote.default_limits()) == want
    monkeypatch.setenv("AMP_SANDBOX_LIMITS", '{"call_seconds": 3}')
    assert vars(zygote.default_limits()) == {**want, "call_seconds": 3}


def test_one_call_gets_20_seconds_unless_its_test_asks_for_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's cut of one call: 20 s of CPU time (a longer one asked for, up to 120 s), twice that on
    the clock, never past the budget left."""
    monkeypatch.delenv("AMP_SANDBOX_LIMITS", raising=False)

    def call_limit(timeout: float | None, left: float = 300.0) -> tuple[float, float, bool]:
        runner = SimpleNamespace(limits=zygote.default_limits(), _budget_left=lambda: left)
        runner._wall_bound = lambda limit: sandbox.SandboxRunner._wall_bound(runner, limit)  # type: ignore[arg-type]
        return sandbox.SandboxRunner._call_limit(runner, timeout)  # type: ignore[arg-type]

    assert call_limit(None) == (20, 40, False)
    assert call_limit(60) == (60, 120, False)
    assert call_limit(500) == (120, 240, False)
    assert call_limit(None, left=5) == (20, 5, True)
    assert call_limit(None, left=39) == (20, 39, True)


def test_the_shipped_limits_without_any_override(shipped: dict[str, Any]) -> None:
    assert shipped["call_seconds"] == 20
    assert shipped["limits"]["call_seconds"] == 20 and shipped["limits"]["max_call_seconds"] == 120
    assert shipped["limits"]["submission_seconds"] == 300 and shipped["limits"]["import_seconds"] == 10


# --------------------------------------------------------------------------- 6: the diagnosis words

#: "This is what happens when ..." for every catalogued bug, copied by hand.
WORDS: dict[str, str] = {
    'growth_off_by_one':
        'the tracker is compared with growth_interval before this clean step is counted, so the scale grows one clean step late',
    'tracker_not_reset_on_backoff':
        'the growth tracker is not reset to 0 when the scale backs off',
    'tracker_not_reset_after_growth':
        'the growth tracker is not reset after the scale grows',
    'tracker_counts_skipped_steps':
        'update() counts skipped (overflowing) steps towards growth too',
    'backoff_divides':
        'the scale is divided by backoff_factor instead of multiplied by it',
    'growth_to_inf':
        'the grown scale is kept even when it overflows float32 to inf',
    'new_scale_resets_tracker':
        'update(new_scale) also resets the growth tracker',
    'backoff_per_overflowing_grad':
        'the scale backs off once per overflowing gradient instead of once per update()',
    'backoff_per_overflowing_optimizer':
        'the scale backs off once per overflowing optimizer instead of once per update()',
    'no_float32_rounding':
        'the scale is kept as a Python (float64) product instead of being rounded to float32',
    'new_scale_keeps_optimizer_state':
        'update(new_scale) returns before clearing the per-optimizer state',
    'init_scale_not_rounded':
        'init_scale is kept as given instead of being rounded to float32',
    'wrong_default_interval':
        "growth_interval defaults to something other than torch's 2000",
    'nan_ignored':
        'only inf is looked for, so NaN gradients are not detected',
    'only_last_grad_checked':
        'found_inf is overwritten in the loop, so only the last gradient counts',
    'only_first_grad_checked':
        'only the first gradient is checked for inf/NaN',
    'only_first_param_group':
        "only the optimizer's first parameter group is unscaled and checked",
    'div_by_scale_tensor':
        'unscale_() divides the gradients by the scale instead of multiplying them by its reciprocal rounded to float32',
    'unscale_in_float64':
        'unscale_() multiplies the gradients by the float64 reciprocal instead of the reciprocal rounded to float32',
    'growth_at_or_above_interval':
        'update() grows once the tracker is at or above growth_interval (>=) instead of when it reaches it (==)',
    'load_state_dict_clamps_tracker':
        'load_state_dict() clamps a restored growth tracker below growth_interval',
    'new_scale_tensor_ignored':
        'update(new_scale) sets the scale only for a Python float, not for a one-element tensor',
    'crash_on_none_grads':
        'parameters whose .grad is None are not skipped',
    'checks_inf_after_unscale':
        'inf/NaN is looked for after unscaling instead of before',
    'inf_check_via_sum':
        'inf/NaN is detected through the sum of each gradient (a finite sum can overflow)',
    'unscale_multiplies_by_scale':
        'unscale_() multiplies the gradients by the scale instead of its reciprocal',
    'unscale_not_in_place':
        'unscale_() replaces each .grad with a new tensor instead of changing it in place',
    'step_unscales_twice':
        'step() unscales again after an explicit unscale_()',
    'double_unscale_no_error':
        'a second unscale_() in the same iteration unscales again instead of raising',
    'update_without_step_no_error':
        'update() without a step() or unscale_() since the last update() does not raise',
    'step_returns_none':
        'step() does not return what optimizer.step() returned',
    'steps_on_inf':
        'step() calls optimizer.step() even when a gradient is inf or NaN',
    'state_never_cleared':
        'update() never clears the per-optimizer state',
    'update_looks_at_last_optimizer':
        'update() looks only at the optimizer stepped last',
    'float16_grads_not_rejected':
        'unscale_() accepts float16 gradients instead of raising ValueError',
    'scale_python_float':
        'scale() multiplies by a Python float, so a float16 loss stays float16',
    'scale_tuple_becomes_list':
        'scale() returns a list when given a tuple',
    'scale_not_nested':
        'scale() scales the items of a list or tuple but does not recurse into nested ones',
    'load_state_dict_drops_tracker':
        'load_state_dict() does not restore the growth tracker',
    'state_dict_wrong_key':
        "state_dict() names the tracker differently from torch's '_growth_tracker'",
    'constructor_accepts_growth_factor_one':
        'the constructor accepts growth_factor == 1',
    'backward_inside_autocast':
        'backward() is called inside the autocast block',
    'no_zero_grad':
        'the gradients are never zeroed, so they accumulate across calls',
    'zero_grad_after_backward':
        'the gradients are zeroed after backward(), so the step sees none',
    'optimizer_step_direct':
        'optimizer.step() is called instead of scaler.step(optimizer)',
    'unscale_then_optimizer_step':
        'the gradients are unscaled and then optimizer.step() is called directly',
    'update_before_step':
        'scaler.update() is called before scaler.step(optimizer)',
    'no_update':
        'scaler.update() is never called',
    'clip_before_unscale':
        'the gradients are clipped before they are unscaled',
    'clip_without_unscale':
        'the gradients are clipped without calling scaler.unscale_() first',
    'model_half':
        'the model is converted with .half() instead of running under autocast',
    'unscaled_backward':
        'backward() is called on the unscaled loss',
    'no_autocast':
        'the forward pass and the loss run without autocast',
    'hardcoded_cuda':
        'autocast\'s device_type is hard-coded to "cuda"',
    'hardcoded_dtype':
        "autocast's dtype is hard-coded to float16",
    'renamed_parameter':
        "amp_step's parameters are named differently from the contract",
    'uses_gradscaler_internals':
        'amp_step reads private attributes of torch.amp.GradScaler',
    'returns_scaled_loss':
        'amp_step returns the scaled loss',
    'returns_attached_loss':
        'amp_step returns the loss still attached to the graph (not detached)',
    'returns_python_float':
        'amp_step returns loss.item() instead of a tensor',
    'delegate_subclass':
        'ToyLossScaler subclasses torch.amp.GradScaler',
    'delegate_wrapper':
        'ToyLossScaler wraps torch.amp.GradScaler',
    'delegate_kernels':
        "ToyLossScaler calls torch's private AMP kernels",
    'delegate_obfuscated':
        'ToyLossScaler reaches torch.amp.GradScaler indirectly',
    'quick_check_backward_inside':
        'the Quick Check answer to Q2 puts backward() inside autocast',
    'quick_check_wrong_and_skipped':
        'a Quick Check answer is skipped or wrong',
    'quick_check_not_letters':
        'the Quick Check answers are not given as letters',
}


def test_every_catalogued_bug_keeps_its_words() -> None:
    english = MISTAKES["en"]  # checks/words.py: what the grader and the public checks say
    changed = {bug: english.get(bug) for bug, text in WORDS.items() if english.get(bug) != text}
    assert not changed, f"the student-facing words of these bugs changed: {changed}"
    assert len(WORDS) >= 8


def test_the_likely_mistake_lines() -> None:
    assert words.sentence(["growth_off_by_one"]) == (
        "Likely mistake: this is what happens when the tracker is compared with growth_interval before this clean "
        "step is counted, so the scale grows one clean step late.")
    assert words.sentence(["no_autocast", "hardcoded_cuda"]) == (
        "Likely mistake: this is what happens when autocast's device_type is hard-coded to \"cuda\", or when the "
        "forward pass and the loss run without autocast.")
    assert words.sentence(["backoff_divides"]) == (
        "Likely mistake: this is what happens when the scale is divided by backoff_factor instead of multiplied by it.")
