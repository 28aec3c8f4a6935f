"""The reference ToyLossScaler agrees exactly with torch.amp.GradScaler("cpu")."""

from __future__ import annotations

import importlib.util
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checks.judge import expect, cases
from checks.runners import harness
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("reference_loss_scaler", ROOT / "solutions" / "loss_scaler.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

grading = settings(derandomize=True, database=None, deadline=None, max_examples=150)


@grading
@given(scenario=cases.generated_scenarios())
def test_reference_matches_torch_exactly_for_power_of_two_factors(scenario: dict[str, Any]) -> None:
    got = harness.run_scaler_ops(scenario, reference.ToyLossScaler)
    expect.check_results(scenario, cases.torch_results(scenario), got)


@grading
@given(scenario=cases.generated_scenarios(powers_of_two=False))
def test_reference_matches_torch_for_any_factors(scenario: dict[str, Any]) -> None:
    got = harness.run_scaler_ops(scenario, reference.ToyLossScaler)
    expect.check_results(scenario, cases.torch_results(scenario), got, only=["observe", "step"])
    expect.check_results(scenario, cases.torch_results(scenario), got, rel=1e-6)


@grading
@given(kwargs=cases.scaler_kwargs(powers_of_two=False), overflows=st.lists(st.booleans(), max_size=40))
def test_long_runs_match_torch_scale_and_tracker(kwargs: dict[str, Any], overflows: list[bool]) -> None:
    args = cases.run_args(kwargs, overflows, opts=2)
    expected, got = cases.torch_results(args), harness.run_scaler_ops(args, reference.ToyLossScaler)
    expect.check_results(args, expected, got, only=["observe", "step"])
