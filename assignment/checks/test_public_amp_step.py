"""Public checks for Task 2 (``amp_step.py``).  The grader runs these too, plus hidden ones.

Every graded behaviour has a public example here; the grader's hidden test of a behaviour
has the same name (the two share the row's points) and only tries other inputs.  The
scaler these checks hand to ``amp_step`` is torch's GradScaler (or torch's GradScaler behind
only the contract's methods), never your ToyLossScaler, so a Task 1 bug costs no Task 2 points.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from checks import expect

CALL = "amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type='cpu', dtype=torch.{dtype})"
FP16_CALL = CALL.format(dtype="float16")


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


# --------------------------------------------------------------------------- checks shared with the hidden tests


def probe(student: Any, **args: Any) -> dict[str, Any]:
    result = student.run("amp_probe", {"dtype": "float16", "scaler": "torch", **args})
    first_call_ok(result, FP16_CALL)
    return result


def per_call(result: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The log split into one list of events per amp_step call."""
    calls: list[list[dict[str, Any]]] = []
    for event in result["log"]:
        if event["event"] == "call":
            calls.append([])
        elif calls:
            calls[-1].append(event)
    return calls


def order(call: list[dict[str, Any]]) -> str:
    return " -> ".join(e["event"] + (f" ({e['call']}: {e['error']})" if e["event"] == "scaler error" else "")
                       for e in call)


def check_zero_grad(student: Any, steps: int) -> None:
    result = probe(student, steps=steps, lr=0.0)
    for index, call in enumerate(per_call(result)):
        kinds = [e["event"] for e in call]
        backward = [e for e in call if e["event"] == "backward"]
        if not backward or not all(e["grads_clear"] for e in backward):
            expect.fail(f"We called amp_step {steps} times. Each call must clear the gradients (optimizer.zero_grad()) "
                        f"before its backward pass; in call {index + 1} the backward pass found the previous "
                        f"call's gradients still there: {order(call)}")
        if "zero_grad" in kinds[kinds.index("backward"):]:
            expect.fail(f"Call {index + 1} cleared the gradients after the backward pass, so the step sees none: "
                        f"{order(call)}. Call optimizer.zero_grad() at the start of amp_step.")


def check_steps_through_scaler(student: Any, steps: int, inject_inf_at: list[int]) -> None:
    result = probe(student, steps=steps, inject_inf_at=inject_inf_at)
    for index, call in enumerate(per_call(result)):
        stepped = [e for e in call if e["event"] == "optimizer.step"]
        if any(not e["via_scaler"] for e in stepped):
            expect.fail(f"amp_step called optimizer.step() directly (call {index + 1}: {order(call)}). "
                        "Use scaler.step(optimizer), which skips the step when gradients overflowed.")
        if "scaler.step" not in [e["event"] for e in call]:
            expect.fail(f"Call {index + 1} never called scaler.step(optimizer): {order(call)}")
        troubled = any(e["event"] == "scaler error" for e in call)  # e.g. float16 params: other rows report it
        if index in inject_inf_at and result["steps"][index]["params_changed"] and not troubled:
            expect.fail(f"The gradients of call {index + 1} held an inf, so the parameters must not change "
                        f"(scaler.step(optimizer) skips the step), but they did: {order(call)}")


def check_update_once_after_step(student: Any, steps: int) -> None:
    result = probe(student, steps=steps)
    for index, call in enumerate(per_call(result)):
        kinds = [e["event"] for e in call]
        stepped = "scaler.step" in kinds  # whether it steps through the scaler is row 2.5's
        if kinds.count("update") != 1 or (stepped and kinds.index("update") < kinds.index("scaler.step")):
            expect.fail(f"Each amp_step call must call scaler.update() exactly once, after scaler.step(optimizer); "
                        f"call {index + 1} did: {order(call)}")


def check_unscale_before_clipping(student: Any, max_norm: float) -> None:
    # A small scale (4) keeps the true gradients far above max_norm even if something else divides them by it.
    result = probe(student, steps=1, max_grad_norm=max_norm, scaler_kwargs={"init_scale": 4.0})
    kinds = [e["event"] for e in result["log"]]
    if "scaler error" in kinds or "scaler.step" not in kinds or "update" in kinds[:kinds.index("scaler.step")]:
        return  # the order of step and update, or the scaler's complaint, is what other rows grade
    seen = events(result, "optimizer.step")
    if not seen:
        expect.fail(f"With max_grad_norm set, the optimizer never stepped: {order(per_call(result)[0])}")
    norm = seen[0]["grad_norm"]
    if not math.isclose(norm, max_norm, rel_tol=1e-2):
        expect.fail(f"We called amp_step(..., max_grad_norm={max_norm}) where the true gradient norm is far larger. "
                    f"The optimizer should see gradients clipped to norm {max_norm}, but saw norm {norm:.4g}. "
                    "Call scaler.unscale_(optimizer) before clip_grad_norm_, so you clip the true gradients.")


def check_returned_loss(student: Any, **args: Any) -> None:
    result = probe(student, steps=1, **args)
    returned = result["steps"][0]["ok"]
    losses = events(result, "loss")
    true_loss = losses[0]["value"] if losses else math.nan
    if returned.get("type") != "Tensor" or returned.get("numel") != 1:
        expect.fail(f"amp_step must return the loss as a one-element tensor, but returned a {returned.get('type')}.")
    if returned["requires_grad"]:
        expect.fail("amp_step must return the loss detached from the graph (loss.detach()).")
    if not math.isclose(returned["value"], true_loss, rel_tol=1e-3):
        expect.fail(f"amp_step must return the unscaled loss {true_loss:.6g}, but returned {returned['value']:.6g}.")


def check_both_scalers(student: Any, scaler: str, by_keyword: bool) -> None:
    name = "a scaler with only the contract's methods" if scaler == "contract" else "torch.amp.GradScaler('cpu')"
    call = (FP16_CALL.replace("model, inputs, targets, loss_fn, optimizer, scaler",
                              "model=model, inputs=inputs, targets=targets, loss_fn=loss_fn, optimizer=optimizer, "
                              "scaler=scaler") if by_keyword else FP16_CALL)
    result = student.run("amp_probe", {"dtype": "float16", "scaler": scaler, "steps": 2, "inject_inf_at": [0],
                                       "by_keyword": by_keyword})
    first_call_ok(result, call + f"  # with {name}")


def check_underflow_converges(student: Any, steps: int, growth_interval: int) -> None:
    what = (f"We trained the underflow demo (fp16 autocast, targets x 1e-4) for {steps} steps with your amp_step and "
            f"torch.amp.GradScaler('cpu', growth_interval={growth_interval})")
    result = student.run("underflow", {"steps": steps, "scaler": "torch",
                                       "scaler_kwargs": {"growth_interval": growth_interval}}, timeout=60)
    expect.ok_or_fail(result, what)
    final = result.get("final_loss", result["losses"][-1] if result["losses"] else math.nan)
    if not final < 1e-12:
        expect.fail(f"{what}. Without scaling the loss stalls near 3e-10; with it the loss should fall below 1e-12, "
                    f"but it ended at {final:.3g}.")


# --------------------------------------------------------------------------- public examples


def test_amp_step_zeroes_grads_every_step(student: Any) -> None:
    check_zero_grad(student, steps=2)


def test_amp_step_steps_through_scaler(student: Any) -> None:
    check_steps_through_scaler(student, steps=2, inject_inf_at=[0])


def test_amp_step_updates_once_after_step(student: Any) -> None:
    check_update_once_after_step(student, steps=1)


def test_amp_step_unscales_before_clipping(student: Any) -> None:
    check_unscale_before_clipping(student, max_norm=1e-3)


def test_amp_step_returns_unscaled_detached_loss(student: Any) -> None:
    check_returned_loss(student)


def test_amp_step_works_with_both_scalers(student: Any) -> None:
    check_both_scalers(student, "contract", by_keyword=True)


def test_underflow_training_converges(student: Any) -> None:
    check_underflow_converges(student, steps=120, growth_interval=10)
