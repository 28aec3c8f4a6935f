"""Public checks for Task 2 (``amp_step.py``).  The grader runs these too, plus hidden ones."""

from __future__ import annotations

from typing import Any

import pytest

from checks import expect

CALL = "amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type='cpu', dtype=torch.{dtype})"


def events(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [event for event in result["log"] if event["event"] == kind]


def first_call_ok(result: dict[str, Any], call: str) -> None:
    for step in result["steps"]:
        expect.ok_or_fail(step, f"We called\n    {call}")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_amp_step_forward_under_autocast(student: Any, dtype: str) -> None:
    call = CALL.format(dtype=dtype)
    result = student.run("amp_probe", {"dtype": dtype, "steps": 1, "scaler": "torch"})
    first_call_ok(result, call)
    for kind in ("forward", "loss"):
        seen = events(result, kind)
        if not seen or not all(e["autocast"] and e["dtype"] == dtype for e in seen):
            got = ", ".join(f"autocast={'on' if e['autocast'] else 'off'} dtype={e['dtype']}" for e in seen) or "never called"
            expect.fail(f"We called\n    {call}\nThe model's {kind} should run under torch.autocast(device_type='cpu', "
                        f"dtype=torch.{dtype}), but it ran with: {got}.")


def test_amp_step_backward_outside_autocast(student: Any) -> None:
    call = CALL.format(dtype="float16")
    result = student.run("amp_probe", {"dtype": "float16", "steps": 1, "scaler": "torch"})
    first_call_ok(result, call)
    seen = events(result, "backward")
    if not seen:
        expect.fail(f"We called\n    {call}\nbut no backward pass reached the model.")
    if any(e["autocast"] for e in seen):
        expect.fail(f"We called\n    {call}\nThe backward pass ran inside torch.autocast; call backward() after "
                    "the `with torch.autocast(...)` block ends.")


def test_amp_step_backward_sees_scaled_loss(student: Any) -> None:
    call = CALL.format(dtype="float16")
    result = student.run("amp_probe", {"dtype": "float16", "steps": 1, "scaler": "torch",
                                       "scaler_kwargs": {"init_scale": 1024.0}})
    first_call_ok(result, call)
    seen = events(result, "backward")
    ratio = seen[0]["grad_ratio"] if seen else 0.0
    if abs(ratio - 1024.0) > 0.01 * 1024.0:
        expect.fail(f"We called\n    {call}\nwith a scaler whose scale is 1024.  The gradient reaching the model's "
                    f"output should be 1024 x the true gradient (backward of scaler.scale(loss)), but it was "
                    f"{ratio:.4g} x.")
