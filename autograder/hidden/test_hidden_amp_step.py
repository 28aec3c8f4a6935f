"""Hidden checks for Task 2 (amp_step).  Never shipped to students."""

from __future__ import annotations

import math
from typing import Any

import pytest

from checks import expect
from checks.test_public_amp_step import CALL, events, first_call_ok

FP16_CALL = CALL.format(dtype="float16")


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
    return " -> ".join(e["event"] for e in call)


def test_amp_step_zeroes_grads_every_step(student: Any) -> None:
    result = probe(student, steps=3, lr=0.0)
    for index, call in enumerate(per_call(result)):
        backward = [e for e in call if e["event"] == "backward"]
        if not backward or not all(e["grads_clear"] for e in backward):
            expect.fail(f"We called amp_step 3 times. Each call must clear the gradients (optimizer.zero_grad()) "
                        f"before its backward pass; in call {index + 1} the backward pass found the previous "
                        f"call's gradients still there: {order(call)}")
    norms = [e["grad_norm"] for e in events(result, "optimizer.step")]
    if len(norms) == 3 and not all(math.isclose(n, norms[0], rel_tol=1e-3) for n in norms):
        expect.fail("We called amp_step 3 times on the same batch with lr=0: the gradients at each optimizer step "
                    f"should be equal, but their norms were {[f'{n:.4g}' for n in norms]} (accumulating?).")


def test_amp_step_steps_through_scaler(student: Any) -> None:
    result = probe(student, steps=3, inject_inf_at=[1])
    calls = per_call(result)
    for index, call in enumerate(calls):
        steps = [e for e in call if e["event"] == "optimizer.step"]
        if any(not e["via_scaler"] for e in steps):
            expect.fail(f"amp_step called optimizer.step() directly (call {index + 1}: {order(call)}). "
                        "Use scaler.step(optimizer), which skips the step when gradients overflowed.")
        if index == 1 and steps:
            expect.fail("On the second call the gradients held an inf, so the optimizer step must be skipped "
                        f"(scaler.step(optimizer) does that), but optimizer.step() ran: {order(call)}")
        if index != 1 and not steps:
            expect.fail(f"Call {index + 1} had finite gradients but the optimizer never stepped: {order(call)}")
    if result["steps"][1]["params_changed"]:
        expect.fail("The parameters changed in a call whose gradients held an inf.")


def test_amp_step_updates_once_after_step(student: Any) -> None:
    result = probe(student, steps=2)
    for index, call in enumerate(per_call(result)):
        kinds = [e["event"] for e in call]
        if kinds.count("update") != 1 or "scaler.step" not in kinds or kinds.index("update") < kinds.index("scaler.step"):
            expect.fail(f"Each amp_step call must call scaler.update() exactly once, after scaler.step(optimizer); "
                        f"call {index + 1} did: {order(call)}")


def test_amp_step_unscales_before_clipping(student: Any) -> None:
    max_norm = 1e-3
    result = probe(student, steps=1, max_grad_norm=max_norm)
    seen = events(result, "optimizer.step")
    if not seen:
        expect.fail("With max_grad_norm set, the optimizer never stepped.")
    norm = seen[0]["grad_norm"]
    if not math.isclose(norm, max_norm, rel_tol=1e-2):
        expect.fail(f"We called amp_step(..., max_grad_norm={max_norm}) where the true gradient norm is far larger. "
                    f"The optimizer should see gradients clipped to norm {max_norm}, but saw norm {norm:.4g}. "
                    "Call scaler.unscale_(optimizer) before clip_grad_norm_, so you clip the true gradients.")


def test_amp_step_returns_unscaled_detached_loss(student: Any) -> None:
    result = probe(student, steps=1)
    returned = result["steps"][0]["ok"]
    losses = events(result, "loss")
    true_loss = losses[0]["value"] if losses else math.nan
    if returned.get("type") != "Tensor" or returned.get("numel") != 1:
        expect.fail(f"amp_step must return the loss as a one-element tensor, but returned a {returned.get('type')}.")
    if returned["requires_grad"]:
        expect.fail("amp_step must return the loss detached from the graph (loss.detach()).")
    if not math.isclose(returned["value"], true_loss, rel_tol=1e-3):
        expect.fail(f"amp_step must return the unscaled loss {true_loss:.6g}, but returned {returned['value']:.6g}.")


@pytest.mark.parametrize("scaler,by_keyword", [("student", False), ("torch", False), ("torch", True)])
def test_amp_step_works_with_both_scalers(student: Any, scaler: str, by_keyword: bool) -> None:
    name = "your ToyLossScaler" if scaler == "student" else "torch.amp.GradScaler('cpu')"
    call = (FP16_CALL.replace("model, inputs, targets, loss_fn, optimizer, scaler",
                              "model=model, inputs=inputs, targets=targets, loss_fn=loss_fn, optimizer=optimizer, "
                              "scaler=scaler") if by_keyword else FP16_CALL)
    result = student.run("amp_probe", {"dtype": "float16", "scaler": scaler, "steps": 2, "inject_inf_at": [0],
                                       "by_keyword": by_keyword})
    first_call_ok(result, call + f"  # with {name}")
    stepped = [bool([e for e in call if e["event"] == "optimizer.step"]) for call in per_call(result)]
    scales = [step["scale_after"] for step in result["steps"]]
    if stepped != [False, True] or scales != [32768.0, 32768.0]:
        expect.fail(f"With {name}: an overflowing first call then a clean one should skip then take the step, "
                    f"leaving scales [32768.0, 32768.0]; got steps {stepped} and scales {scales}.")


def test_underflow_training_converges(student: Any) -> None:
    result = student.run("underflow", {"steps": 200, "scaler_kwargs": {"growth_interval": 20}}, timeout=60)
    expect.ok_or_fail(result, "We trained the underflow demo (fp16 autocast, targets x 1e-4) with your amp_step "
                              "and ToyLossScaler for 200 steps")
    final = result["losses"][-1] if result["losses"] else math.nan
    if not final < 1e-12:
        expect.fail("We trained the underflow demo (fp16 autocast, targets x 1e-4) with your amp_step and "
                    f"ToyLossScaler(growth_interval=20) for 200 steps. Without scaling the loss stalls near 3e-10; "
                    f"with it the loss should fall below 1e-12, but it ended at {final:.3g}.")
