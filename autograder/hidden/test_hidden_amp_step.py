"""Hidden checks for Task 2 (amp_step).  Never shipped to students.

Each test has the name of a public example (checks/test_public_amp_step.py) and runs the same
check with other inputs: more calls, other overflow positions, other clipping norms.
"""

from __future__ import annotations

from typing import Any

import pytest

from checks.test_public_amp_step import (check_both_scalers, check_returned_loss, check_steps_through_scaler,
                                         check_unscale_before_clipping, check_underflow_converges,
                                         check_update_once_after_step, check_zero_grad)


def test_amp_step_zeroes_grads_every_step(student: Any) -> None:
    check_zero_grad(student, steps=3)


def test_amp_step_steps_through_scaler(student: Any) -> None:
    check_steps_through_scaler(student, steps=3, inject_inf_at=[1])


def test_amp_step_updates_once_after_step(student: Any) -> None:
    check_update_once_after_step(student, steps=3, inject_inf_at=[1])


@pytest.mark.parametrize("max_norm", [1e-3, 1e-2])
def test_amp_step_unscales_before_clipping(student: Any, max_norm: float) -> None:
    check_unscale_before_clipping(student, max_norm)


def test_amp_step_returns_unscaled_detached_loss(student: Any) -> None:
    check_returned_loss(student, scaler_kwargs={"init_scale": 1024.0})


@pytest.mark.parametrize("scaler,by_keyword", [("contract", False), ("torch", False), ("torch", True)])
def test_amp_step_works_with_both_scalers(student: Any, scaler: str, by_keyword: bool) -> None:
    check_both_scalers(student, scaler, by_keyword)


def test_underflow_training_converges(student: Any) -> None:
    check_underflow_converges(student, steps=200, growth_interval=20)
