"""Public checks for Task 2 (``amp_step.py``).  The grader runs these too, plus hidden ones.

Each row is judged on what ``amp_step`` *does*: the parameters, gradients, scaler state and
returned loss after every call, compared with a correct ``amp_step`` run on the same inputs
(the grader runs one; here its effects are read from ``checks/amp_effects.json``, see
``checks/judge/recorded.py``).  What your code called is shown to explain a failure.

Every graded behaviour has a public example here; the grader's hidden test of a behaviour
has the same name (the two share the row's points) and only tries other inputs.  The
scaler these checks hand to ``amp_step`` is torch's GradScaler (or torch's GradScaler behind
only the contract's methods), never your ToyLossScaler, so a Task 1 bug costs no Task 2 points.
"""

from __future__ import annotations

from typing import Any

import pytest

from checks.judge import amp_snippet, effects, expect, recorded
from checks.runners import probes
from checks.words import quoted, say

CALL = "amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type='cpu', dtype=torch.{dtype}{extra})"

# What each row's behaviour is ("amp.right.<behaviour>") and how to get it right ("amp.hint.<behaviour>"), as the
# failure message states them, are in the words table (checks/words.py); the behaviours, in checks/judge/effects.py.


def described(args: dict[str, Any]) -> str:
    """The scenario ``args`` in words, for failure messages."""
    extra = f", max_grad_norm={args['max_grad_norm']}" if args.get("max_grad_norm") is not None else ""
    call = CALL.format(dtype=args.get("dtype", "float16"), extra=extra)
    if args.get("by_keyword"):
        call = call.replace("model, inputs, targets, loss_fn, optimizer, scaler",
                            "model=model, inputs=inputs, targets=targets, loss_fn=loss_fn, optimizer=optimizer, "
                            "scaler=scaler")
    scaler = say("amp.contract_scaler") if args.get("scaler") == "contract" \
        else "torch.amp.GradScaler('cpu'" + (f", {expect.kwargs_text(args['scaler_kwargs'])}"
                                             if args.get("scaler_kwargs") else "") + ")"
    steps = int(args.get("steps", 1))
    infs = args.get("inject_inf_at", [])
    overflow = say("amp.overflow", calls=", ".join(str(i + 1) for i in infs)) if infs else ""
    return say("amp.called", call=call, steps=steps, plural=say("amp.plural") if steps > 1 else "",
               lr=args.get("lr", 0.01), scaler=scaler, overflow=overflow)


def check_row(student: Any, row: str, **args: Any) -> None:
    """Fail unless ``amp_step``'s effects in the probe scenario ``args`` are those of a program right on ``row``, a
    behaviour of :data:`checks.judge.effects.BEHAVIOURS` (its row's number is the rubric's alone)."""
    scenario = {"dtype": "float16", "scaler": "torch", "steps": 1, **args}
    result = student.run("amp_probe", scenario)
    # An error is an effect like the others (the judge's replay of the same choices raises it too, or not)
    verdict = recorded.verdict(row, scenario, result)
    if verdict:
        calls = effects.calls_of(result)
        seen = "\n".join(say("amp.seen_call", number=i + 1, order=effects.call_order(result, i))
                         for i in range(min(len(calls), 3)))
        right = say(f"amp.right.{row}")
        if verdict.masked_by:
            head, hint = say("amp.masked_head", right=right), say("amp.masked_hint", masked=verdict.masked_by)
        else:
            head = say("amp.differ_head", right=right)
            failed = verdict.first.call if verdict.first is not None else 0  # the call the explanation reads
            hint = " ".join(filter(None, [effects.explain(row, result, scenario, failed), say(f"amp.hint.{row}")]))
        again = amp_snippet.reproduction(scenario, verdict.first)
        expect.fail(f"{described(scenario)}\n{head}\n{effects.all_lines(verdict.lines)}\n{hint}\n\n"
                    f"{say('amp.seen')}\n{seen}" + (f"\n\n{again}" if again else ""))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_amp_step_forward_under_autocast(student: Any, dtype: str) -> None:
    check_row(student, effects.FORWARD, dtype=dtype)


def test_amp_step_backward_outside_autocast(student: Any) -> None:
    check_row(student, effects.BACKWARD)


def test_amp_step_backward_sees_scaled_loss(student: Any) -> None:
    check_row(student, effects.SCALED_BACKWARD, scaler_kwargs={"init_scale": 1024.0})


# --------------------------------------------------------------------------- checks shared with the hidden tests


def check_zero_grad(student: Any, steps: int) -> None:
    # A small scale keeps a step taken directly by the optimizer (row 2.5's bug) finite, so that
    # zeroing the gradients still shows in the effects of the calls after it.
    check_row(student, effects.ZERO_GRAD, steps=steps, scaler_kwargs={"init_scale": 2.0})


def check_steps_through_scaler(student: Any, steps: int, inject_inf_at: list[int]) -> None:
    # A small scale: a second step (the second unscale divides the gradients by it again) then moves the
    # parameters by more than rounding, whatever else the call gets wrong.
    check_row(student, effects.STEP, steps=steps, inject_inf_at=inject_inf_at, scaler_kwargs={"init_scale": 2.0})


def check_update_once_after_step(student: Any, steps: int, inject_inf_at: list[int]) -> None:
    # An overflowing call: only then does an update() skipped along with a skipped step leave an effect.
    check_row(student, effects.UPDATE, steps=steps, inject_inf_at=inject_inf_at)


def check_unscale_before_clipping(student: Any, max_norm: float) -> None:
    # A small scale (4) keeps the true gradients far above max_norm even if something else divides them by it.
    check_row(student, effects.CLIPPING, max_grad_norm=max_norm, scaler_kwargs={"init_scale": 4.0})


def check_returned_loss(student: Any, **args: Any) -> None:
    check_row(student, effects.RETURNED_LOSS, **args)


def check_both_scalers(student: Any, scaler: str, by_keyword: bool) -> None:
    check_row(student, effects.ANY_SCALER, scaler=scaler, steps=2, inject_inf_at=[0], by_keyword=by_keyword)


def check_underflow_converges(student: Any, steps: int, growth_interval: int) -> None:
    what = say("amp.underflow", steps=steps, interval=growth_interval)
    scenario = {"steps": steps, "scaler": "torch", "scaler_kwargs": {"growth_interval": growth_interval}}
    result = student.run("underflow", scenario, timeout=60)
    expect.ok_or_fail(result, what)
    weight = result.get("final_weight")
    if not isinstance(weight, list):
        expect.fail(say("amp.underflow_weight", what=what, weight=weight))
    # Where training ended is not enough: how it got there (the grader replays every call; a local run cannot)
    why = recorded.underflow_verdict(scenario, result)
    if why:
        expect.fail(say("amp.underflow_steps", what=what, why=why))
    raised = effects.own_error(result)  # what a local run can tell without the replay: no correct amp_step raises
    if raised is not None:
        number, error = raised
        expect.fail(say("amp.underflow_raised", what=what, number=number, **quoted(error))
                    + "\n\n" + amp_snippet.underflow_reproduction(scenario, raised=raised))
    final = probes.underflow_loss(scenario, weight)  # measured here from the weight, never taken from amp_step
    if not final < 1e-12:
        expect.fail(say("amp.underflow_stalled", what=what, final=f"{final:.3g}") + "\n\n"
                    + amp_snippet.underflow_reproduction(scenario, final=f"{final:.3g}"))


# --------------------------------------------------------------------------- public examples


def test_amp_step_zeroes_grads_every_step(student: Any) -> None:
    check_zero_grad(student, steps=2)


def test_amp_step_steps_through_scaler(student: Any) -> None:
    check_steps_through_scaler(student, steps=2, inject_inf_at=[0])


def test_amp_step_updates_once_after_step(student: Any) -> None:
    # A clean call first: "never update" and "update only after a clean step" then differ in the first call, so
    # the check names either mistake as the grader does (after an overflowing first call both look alike).
    check_update_once_after_step(student, steps=2, inject_inf_at=[1])


def test_amp_step_unscales_before_clipping(student: Any) -> None:
    check_unscale_before_clipping(student, max_norm=1e-3)


def test_amp_step_returns_unscaled_detached_loss(student: Any) -> None:
    check_returned_loss(student)


def test_amp_step_works_with_both_scalers(student: Any) -> None:
    check_both_scalers(student, "contract", by_keyword=True)


def test_underflow_training_converges(student: Any) -> None:
    check_underflow_converges(student, steps=120, growth_interval=10)
