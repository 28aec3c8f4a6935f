"""Public checks for Task 2 (``amp_step.py``).  The grader runs these too, plus hidden ones.

Each row is judged on what ``amp_step`` *does*: the parameters, gradients, scaler state and
returned loss after every call, compared with a correct ``amp_step`` run on the same inputs
(see ``checks/judge/amp_reference.py``).  What your code called is shown to explain a failure.

Every graded behaviour has a public example here; the grader's hidden test of a behaviour
has the same name (the two share the row's points) and only tries other inputs.  The
scaler these checks hand to ``amp_step`` is torch's GradScaler (or torch's GradScaler behind
only the contract's methods), never your ToyLossScaler, so a Task 1 bug costs no Task 2 points.
"""

from __future__ import annotations

from typing import Any

import pytest

from checks.judge import amp_reference, expect
from checks.runners import probes

CALL = "amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type='cpu', dtype=torch.{dtype}{extra})"

#: What each row's behaviour is, as the failure message states it.
RIGHT = {
    "2.1": "(forward and loss under torch.autocast with the dtype it was given)",
    "2.2": "(backward after the autocast block)",
    "2.3": "(backward of scaler.scale(loss))",
    "2.4": "(optimizer.zero_grad() before the forward pass)",
    "2.5": "(scaler.step(optimizer) once, which skips the step when gradients overflowed)",
    "2.6": "(scaler.update() once, after scaler.step(optimizer))",
    "2.7": "(scaler.unscale_(optimizer), then clipping, then scaler.step(optimizer))",
    "2.8": "(returns the unscaled loss, detached)",
    "2.9": "",
}
HINTS = {
    "2.1": "Run the model's forward and the loss inside `with torch.autocast(device_type=device_type, dtype=dtype):`, "
           "with the device type and dtype amp_step was given, and keep the model in float32 (no .half()).",
    "2.2": "Call backward() after the `with torch.autocast(...)` block ends: autocast would recast the backward "
           "pass's own matmuls (the model's backward here has one).",
    "2.3": "Call backward() on scaler.scale(loss), not on the loss itself.",
    "2.4": "Call optimizer.zero_grad() at the start of amp_step, so that each call's step sees only its own gradients.",
    "2.5": "Step with scaler.step(optimizer), once per call, never optimizer.step() directly: the scaler skips the "
           "step when the gradients hold an inf or NaN.",
    "2.6": "Call scaler.update() exactly once per call, after scaler.step(optimizer).",
    "2.7": "With max_grad_norm set, call scaler.unscale_(optimizer) before clip_grad_norm_ (so you clip the true "
           "gradients), then scaler.step(optimizer).",
    "2.8": "Return the unscaled loss of this call as a one-element tensor detached from the graph (loss.detach()).",
    "2.9": "amp_step must work with any scaler that has the contract's methods, called with positional or keyword "
           "arguments (the contract's parameter names: model, inputs, targets, loss_fn, optimizer, scaler).",
}


def described(args: dict[str, Any]) -> str:
    """The scenario ``args`` in words, for failure messages."""
    extra = f", max_grad_norm={args['max_grad_norm']}" if args.get("max_grad_norm") is not None else ""
    call = CALL.format(dtype=args.get("dtype", "float16"), extra=extra)
    if args.get("by_keyword"):
        call = call.replace("model, inputs, targets, loss_fn, optimizer, scaler",
                            "model=model, inputs=inputs, targets=targets, loss_fn=loss_fn, optimizer=optimizer, "
                            "scaler=scaler")
    scaler = "a scaler with only the contract's methods (torch's inside)" if args.get("scaler") == "contract" \
        else "torch.amp.GradScaler('cpu'" + (f", {expect.kwargs_text(args['scaler_kwargs'])}"
                                             if args.get("scaler_kwargs") else "") + ")"
    steps = int(args.get("steps", 1))
    infs = args.get("inject_inf_at", [])
    overflow = f"; the gradients of call {', '.join(str(i + 1) for i in infs)} held an inf" if infs else ""
    return (f"We called\n    {call}\n{steps} time{'s' if steps > 1 else ''} on a small MLP, SGD(lr="
            f"{args.get('lr', 0.01)}) and {scaler}{overflow}.")


def check_row(student: Any, row: str, **args: Any) -> None:
    """Fail unless ``amp_step``'s effects in the probe scenario ``args`` are those of a program right on ``row``."""
    scenario = {"dtype": "float16", "scaler": "torch", "steps": 1, **args}
    result = student.run("amp_probe", scenario)
    for step in result["steps"]:
        expect.ok_or_fail(step, described(scenario))
    verdict = amp_reference.judge(row, scenario, result)
    if verdict:
        calls = amp_reference.calls_of(result)
        seen = "\n".join(f"    call {i + 1}: {amp_reference.call_order(result, i)}" for i in range(min(len(calls), 3)))
        if verdict.masked_by:
            head, hint = f"We cannot see whether your amp_step gets this right {RIGHT[row]}:", \
                f"Fix the other behaviour first ({verdict.masked_by}); this row is judged on its effects."
        else:
            head = f"Compared with a correct amp_step {RIGHT[row]}, the effects differ:"
            hint = " ".join(filter(None, [amp_reference.explain(row, result, scenario), HINTS[row]]))
        expect.fail(f"{described(scenario)}\n{head}\n{amp_reference.all_lines(verdict.lines)}\n{hint}\n\n"
                    f"What your amp_step called:\n{seen}")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_amp_step_forward_under_autocast(student: Any, dtype: str) -> None:
    check_row(student, "2.1", dtype=dtype)


def test_amp_step_backward_outside_autocast(student: Any) -> None:
    check_row(student, "2.2")


def test_amp_step_backward_sees_scaled_loss(student: Any) -> None:
    check_row(student, "2.3", scaler_kwargs={"init_scale": 1024.0})


# --------------------------------------------------------------------------- checks shared with the hidden tests


def check_zero_grad(student: Any, steps: int) -> None:
    # A small scale keeps a step taken directly by the optimizer (row 2.5's bug) finite, so that
    # zeroing the gradients still shows in the effects of the calls after it.
    check_row(student, "2.4", steps=steps, scaler_kwargs={"init_scale": 2.0})


def check_steps_through_scaler(student: Any, steps: int, inject_inf_at: list[int]) -> None:
    # A small scale: a second step (the second unscale divides the gradients by it again) then moves the
    # parameters by more than rounding, whatever else the call gets wrong.
    check_row(student, "2.5", steps=steps, inject_inf_at=inject_inf_at, scaler_kwargs={"init_scale": 2.0})


def check_update_once_after_step(student: Any, steps: int, inject_inf_at: list[int]) -> None:
    # An overflowing call: only then does an update() skipped along with a skipped step leave an effect.
    check_row(student, "2.6", steps=steps, inject_inf_at=inject_inf_at)


def check_unscale_before_clipping(student: Any, max_norm: float) -> None:
    # A small scale (4) keeps the true gradients far above max_norm even if something else divides them by it.
    check_row(student, "2.7", max_grad_norm=max_norm, scaler_kwargs={"init_scale": 4.0})


def check_returned_loss(student: Any, **args: Any) -> None:
    check_row(student, "2.8", **args)


def check_both_scalers(student: Any, scaler: str, by_keyword: bool) -> None:
    check_row(student, "2.9", scaler=scaler, steps=2, inject_inf_at=[0], by_keyword=by_keyword)


def check_underflow_converges(student: Any, steps: int, growth_interval: int) -> None:
    what = (f"We trained the underflow demo (fp16 autocast, targets x 1e-4) for {steps} steps with your amp_step and "
            f"torch.amp.GradScaler('cpu', growth_interval={growth_interval})")
    scenario = {"steps": steps, "scaler": "torch", "scaler_kwargs": {"growth_interval": growth_interval}}
    result = student.run("underflow", scenario, timeout=60)
    expect.ok_or_fail(result, what)
    weight = result.get("final_weight")
    if not isinstance(weight, list):
        expect.fail(f"{what}, but after training the model's weight was {weight}: it must stay the model's own "
                    "float32 parameter.")
    final = probes.underflow_loss(scenario, weight)  # measured here from the weight, never taken from amp_step
    if not final < 1e-12:
        expect.fail(f"{what}. Without scaling the loss stalls near 3e-10; with it the loss should fall below 1e-12, "
                    f"but the final weight gives {final:.3g}.")


# --------------------------------------------------------------------------- public examples


def test_amp_step_zeroes_grads_every_step(student: Any) -> None:
    check_zero_grad(student, steps=2)


def test_amp_step_steps_through_scaler(student: Any) -> None:
    check_steps_through_scaler(student, steps=2, inject_inf_at=[0])


def test_amp_step_updates_once_after_step(student: Any) -> None:
    check_update_once_after_step(student, steps=2, inject_inf_at=[0])


def test_amp_step_unscales_before_clipping(student: Any) -> None:
    check_unscale_before_clipping(student, max_norm=1e-3)


def test_amp_step_returns_unscaled_detached_loss(student: Any) -> None:
    check_returned_loss(student)


def test_amp_step_works_with_both_scalers(student: Any) -> None:
    check_both_scalers(student, "contract", by_keyword=True)


def test_underflow_training_converges(student: Any) -> None:
    check_underflow_converges(student, steps=120, growth_interval=10)
