"""Public checks for Task 1 (``loss_scaler.py``).  The grader runs these too, plus hidden ones.

The English ``what`` of a ``@given`` test stays written in it (the failure message speaks the current language:
:func:`checks.words.localised`): hypothesis seeds a test's examples from its source, so rewording it would change
the inputs tried.

There is one public example of every graded behaviour: the grader's hidden tests of a
behaviour have the same name as its public test here (the two share the row's points) and
only try other inputs and sizes.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.judge import behaviours, expect, cases, sequences
from checks.words import say


@pytest.mark.parametrize("kwargs", cases.BAD_CONSTRUCTOR_KWARGS + cases.EDGE_CONSTRUCTOR_KWARGS,
                         ids=lambda kw: expect.kwargs_text(kw))
def test_constructor_rejects_bad_arguments(student: Any, kwargs: dict[str, Any]) -> None:
    args = {"world": cases.world([[[1]]]), "ops": [{"op": "new", "kwargs": kwargs}]}
    [result] = student.run("scaler_ops", args)
    if kwargs in cases.EDGE_CONSTRUCTOR_KWARGS:  # bad arguments only: these are good ones
        if "error" in result:
            expect.mismatch(args, 0, say("do.run"), result,
                            what=say("what.constructor_edge", kwargs=expect.kwargs_text(kwargs)))
        return
    if not expect.raised(result, "ValueError"):
        expect.mismatch(args, 0, say("do.raise", error="ValueError"), result,
                        what=say("what.constructor", kwargs=expect.kwargs_text(kwargs)))


@given(loss=st.sampled_from([1.5, 2.0, 100.0, 60000.0, [60000.0, 1.0], [0.5, 3.0]]))
def test_scale_returns_float32_without_overflow(student: Any, loss: Any) -> None:
    args = {"world": cases.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": 2.0**16}},
                    {"op": "scale", "values": [loss], "dtype": "float16"}]}
    expect.check_results(args, cases.torch_results(args), student.run("scaler_ops", args),
                         what="scale() must multiply by the scale held as a 0-dim float32 tensor: a 0-dim float16 "
                              "loss comes back float32 (no overflow above 65504); a float16 tensor with dimensions "
                              "keeps its dtype (torch's type promotion).")


@given(scale=cases.power_of_two_scales, data=st.data())
def test_unscale_divides_grads_in_place(student: Any, scale: float, data: st.DataObject) -> None:
    sizes = [2, 3, 1]
    grads = [data.draw(cases.grad_values(size, allow_special=False)) for size in sizes]
    if all(g is None for g in grads):
        grads[0] = [1.0, 2.0]
    args = {"world": cases.world([[sizes]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": scale}},
                    {"op": "grads", "opt": 0, "values": grads},
                    {"op": "unscale_", "opt": 0}, {"op": "step", "opt": 0}, {"op": "grads_of", "opt": 0}]}
    expect.check_results(args, cases.torch_results(args), student.run("scaler_ops", args),
                         only=["unscale_", "grads_of"],
                         what="unscale_() must multiply every existing .grad by the float32 reciprocal of the scale, "
                              "in place (same tensor objects), skipping None grads; step() after it must not "
                              "unscale again.")


def test_step_is_skipped_on_inf_or_nan(student: Any) -> None:
    behaviours.skipped_step(student, [2], math.inf, "step")  # step() unscales and finds the inf itself
    behaviours.skipped_step(student, [2, 3], -math.inf, "unscale_")  # an explicit unscale_() found it first
    behaviours.skipped_step(student, [2, 1], math.inf, "clip")  # ... and the gradients were clipped before step()


@given(kwargs=cases.scaler_kwargs(), runs=cases.optimizer_runs(2, max_overflowing=1))
def test_update_backs_off_after_inf_or_nan(student: Any, kwargs: dict[str, Any], runs: list[list[int]]) -> None:
    behaviours.backoff(student, kwargs, runs, opts=2)


# ------------------------------------------------- public examples of the behaviours the hidden tests grade


def test_update_rule_properties(student: Any) -> None:
    kwargs = {"init_scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2}
    behaviours.growth(student, kwargs, [[], [], [], [0], [], [], []], opts=1)


def test_update_rule_non_power_of_two_factors(student: Any) -> None:
    kwargs = {"init_scale": 0.1, "growth_factor": 1.1, "backoff_factor": 0.3, "growth_interval": 1}
    behaviours.float32_rounding(student, kwargs, [False, False, True, False])


def test_growth_skipped_when_float32_would_overflow(student: Any) -> None:
    behaviours.no_growth_to_inf(student, {"init_scale": 2.0**127, "growth_factor": 2.0, "growth_interval": 1}, 2)


def test_update_new_scale_keeps_tracker(student: Any) -> None:
    behaviours.new_scale_keeps_tracker(student, {"init_scale": 1024.0}, clean=2, new_scale=8.0, after=[False])


def test_one_backoff_per_update(student: Any) -> None:
    behaviours.one_backoff_per_update(student, opts=2, bad_params=2, special=math.inf)


def test_matches_torch_gradscaler(student: Any) -> None:
    w = cases.world([[[2], [1]], [[3]]])
    ops: list[dict[str, Any]] = [{"op": "new", "kwargs": {"init_scale": 4.0, "growth_interval": 2}}]
    for grads0 in ([[1.0, -2.0], None], [[math.nan, 1.0], [3.0]], [[0.5, 0.25], [1.0]]):
        ops += [{"op": "scale", "values": [1.5], "dtype": "float16"},
                {"op": "grads", "opt": 0, "values": grads0}, {"op": "unscale_", "opt": 0},
                {"op": "clip", "opt": 0, "max_norm": 0.5}, {"op": "step", "opt": 0}, {"op": "params", "opt": 0},
                {"op": "grads", "opt": 1, "values": [[2.0, 4.0, 8.0]]}, {"op": "step", "opt": 1},
                {"op": "update"}, {"op": "observe"}]
    behaviours.matches_torch(student, {"world": w, "ops": ops}, powers_of_two=True)
    # Checkpoints: one with a tracker below the interval (a wrong load_state_dict shows here: row 1.16's), then one
    # past it (torch loads any), from which a clean step counts on and does not grow (this row's).  Charged as the
    # search charges, unshrunk: a deviation another row's behaviour owns is that row's (one cause, one deduction).
    state = {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3, "_growth_tracker": 1}
    restored = [{"op": "new", "kwargs": {}}, {"op": "load_state_dict", "state": state}, {"op": "observe"},
                {"op": "load_state_dict", "state": {**state, "growth_interval": 2, "_growth_tracker": 3}},
                {"op": "observe"}, {"op": "grads", "opt": 0, "values": [[1.0, -2.0]]}, {"op": "step", "opt": 0},
                {"op": "update"}, {"op": "observe"}, {"op": "state_dict"}]
    behaviours.differential_search(student, st.just({"world": cases.world([[[2]]]), "ops": restored}), 1,
                                   shrink=False)
    behaviours.differential_search(student, sequences.call_sequences(public=True), 10)


def test_unscale_bit_exact(student: Any) -> None:
    behaviours.overflow_detection(student, 1.0, [[1.0, -math.inf], [2.0]])
    behaviours.overflow_detection(student, 2.0, [[1.0, 2.0], [math.nan]])
    behaviours.overflow_detection(student, 1.0, [[math.nan, 1.0], [2.0]])  # NaN in the first gradient too
    behaviours.overflow_detection(student, 0.25, [[3e38, 1.0], [2.0]])  # finite, though 3e38 * 4 overflows
    behaviours.overflow_detection(student, 1.0, [[3e38, 3e38], [1.0]])  # finite, though their sum overflows


def test_misuse_raises_runtime_error(student: Any) -> None:
    for calls in (["unscale_", "unscale_"], ["step", "unscale_"], ["step", "step"], ["step", "update", "update"]):
        behaviours.misuse(student, calls)


def test_float16_grads_rejected(student: Any) -> None:
    behaviours.float16_rejected(student, [1.0, 2.0])


def test_scale_lists_and_tuples(student: Any) -> None:
    behaviours.lists_and_tuples(student, [2.0, 60000.0], "tuple")
    behaviours.lists_and_tuples(student, [0.5, 3.0, 60000.0], "nested")  # "nested as you like"


def test_state_dict_round_trip(student: Any) -> None:
    kwargs = {"init_scale": 16.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 3}
    behaviours.state_round_trip(student, kwargs, [False, True, False, False])


def test_defaults_and_restored_state(student: Any) -> None:
    behaviours.defaults(student)
