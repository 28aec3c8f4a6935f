"""Public checks for Task 1 (``loss_scaler.py``).  The grader runs these too, plus hidden ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks import expect, scenarios


@pytest.mark.parametrize("kwargs", scenarios.BAD_CONSTRUCTOR_KWARGS, ids=lambda kw: expect._kwargs(kw))
def test_constructor_rejects_bad_arguments(student: Any, kwargs: dict[str, Any]) -> None:
    args = {"world": scenarios.world([[[1]]]), "ops": [{"op": "new", "kwargs": kwargs}]}
    [result] = student.run("scaler_ops", args)
    if not expect.raised(result, "ValueError"):
        expect.fail(f"ToyLossScaler({expect._kwargs(kwargs)}) should raise ValueError, but it {expect.describe(result)}")


@given(loss=st.sampled_from([1.5, 2.0, 100.0, 60000.0]), container=st.sampled_from(["tensor", "list", "tuple"]))
def test_scale_returns_float32_without_overflow(student: Any, loss: float, container: str) -> None:
    values = [loss] if container == "tensor" else [loss, 0.5]
    args = {"world": scenarios.world([[[1]]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": 2.0**16}},
                    {"op": "scale", "values": values, "dtype": "float16", "container": container}]}
    results = student.run("scaler_ops", args)
    expect.check_results(args, scenarios.torch_results(args), results,
                         what="scale() must multiply by the scale held as float32, so a float16 loss "
                              "comes back float32 (no overflow above 65504) in the same container type.")


@given(scale=scenarios.power_of_two_scales, data=st.data())
def test_unscale_divides_grads_in_place(student: Any, scale: float, data: st.DataObject) -> None:
    sizes = [2, 3, 1]
    grads = [data.draw(scenarios.grad_values(size, allow_special=False)) for size in sizes]
    args = {"world": scenarios.world([[sizes]]),
            "ops": [{"op": "new", "kwargs": {"init_scale": scale}},
                    {"op": "grads", "opt": 0, "values": grads},
                    {"op": "unscale_", "opt": 0}]}
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         what="unscale_() must multiply every existing .grad by the float32 reciprocal of "
                              "the scale, in place (same tensor objects), skipping None grads.")


@given(special=st.sampled_from(scenarios.SPECIALS), where=st.integers(0, 4))
def test_step_is_skipped_on_inf_or_nan(student: Any, special: float, where: int) -> None:
    w = scenarios.world([[[2, 3]]])
    args = {"world": w, "ops": [{"op": "new", "kwargs": {}},
                                {"op": "grads", "opt": 0, "values": scenarios.overflow_grads([2, 3], special, where)},
                                {"op": "step", "opt": 0}, {"op": "params", "opt": 0},
                                {"op": "update"},
                                {"op": "grads", "opt": 0, "values": scenarios.clean_grads([2, 3])},
                                {"op": "step", "opt": 0}, {"op": "params", "opt": 0}]}
    expect.check_results(args, scenarios.torch_results(args), student.run("scaler_ops", args),
                         what="step() must skip optimizer.step() (and return None) when a gradient holds "
                              "inf or NaN, and otherwise return what optimizer.step() returned.")


@given(kwargs=scenarios.scaler_kwargs(), overflows=scenarios.overflow_runs)
def test_update_rule_one_optimizer(student: Any, kwargs: dict[str, Any], overflows: list[bool]) -> None:
    args = scenarios.run_args(kwargs, overflows)
    scenarios.check_update_rule(
        args, student.run("scaler_ops", args), kwargs, overflows,
        "update() must back off (scale * backoff_factor, tracker = 0) after an overflow, and grow "
        "(scale * growth_factor, tracker = 0) after growth_interval clean steps in a row.")
