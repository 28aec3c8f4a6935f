"""Task 2 earns points from effects only: forged records, tensor subclasses, a step never taken.

These run the probe and the judge in this process (no sandbox): the "student" is an
``amp_step`` written here, or a probe result edited the way a student who reached the
harness could edit it.  The judge (:func:`autograder.engine.amp_reference.judge`) must then fail the
rows the effects do not earn, whatever the log (the record of what was called) says, and
keep the rows an honest bug elsewhere does not touch.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Callable

import pytest
import torch

from autograder.engine import amp_reference, underflow_steps
from autograder.engine.amp_reference import CORRECT, Config, Verdict, reference_amp_step
from checks.judge import effects, replies  # conftest puts assignment/ on sys.path
from checks.runners import harness, probes

#: One scenario per row, as the public checks send them (checks/test_public_amp_step.py).
BASE = {"dtype": "float16", "scaler": "torch", "steps": 1}
ROW_ARGS: dict[str, dict[str, Any]] = {
    "2.1": {**BASE, "dtype": "bfloat16"},
    "2.2": BASE,
    "2.3": {**BASE, "scaler_kwargs": {"init_scale": 1024.0}},
    "2.4": {**BASE, "steps": 2, "scaler_kwargs": {"init_scale": 2.0}},
    "2.5": {**BASE, "steps": 2, "inject_inf_at": [0], "scaler_kwargs": {"init_scale": 2.0}},
    "2.6": {**BASE, "steps": 2, "inject_inf_at": [0]},
    "2.7": {**BASE, "max_grad_norm": 1e-3, "scaler_kwargs": {"init_scale": 4.0}},
    "2.8": BASE,
    "2.9": {**BASE, "scaler": "contract", "steps": 2, "inject_inf_at": [0], "by_keyword": True},
}
#: Each row's behaviour, as its public test names it (checks/test_public_amp_step.py); the tests here speak rows.
BEHAVIOUR = {"2.1": effects.FORWARD, "2.2": effects.BACKWARD, "2.3": effects.SCALED_BACKWARD, "2.4": effects.ZERO_GRAD,
             "2.5": effects.STEP, "2.6": effects.UPDATE, "2.7": effects.CLIPPING, "2.8": effects.RETURNED_LOSS,
             "2.9": effects.ANY_SCALER}


def judge(row: str, args: dict[str, Any], result: dict[str, Any]) -> Verdict:
    """The grader's verdict on row ``row``'s behaviour."""
    return amp_reference.judge(BEHAVIOUR[row], args, result)
ROWS = tuple(ROW_ARGS)


def run(args: dict[str, Any], amp_step: Callable[..., Any]) -> dict[str, Any]:
    """The probe's reply for ``amp_step``, round-tripped through JSON as the sandbox sends it."""
    make = probes.ContractScaler if args.get("scaler") == "contract" else harness.torch_scaler
    return json.loads(json.dumps(probes.run_amp_probe(json.loads(json.dumps(args)), amp_step, make)))


def failing_rows(amp_step: Callable[..., Any]) -> set[str]:
    return {row for row, args in ROW_ARGS.items() if judge(row, args, run(args, amp_step))}


def test_correct_reference_earns_every_row() -> None:
    assert failing_rows(reference_amp_step(CORRECT)) == set()


#: One wrong behaviour per row: the configuration and the rows it must cost.  Most cost their own row
#: only; a few leave later behaviours no effect to judge by, which then earn nothing (docs/security.md, Task 2).
MASKS_STEP = {"2.6", "2.7"}  # torch's scaler refuses update (and makes clipping order moot) without a step
SINGLE_BUGS = [
    (Config(forward=None, loss=None), {"2.1"}),
    (Config(forward=amp_reference.OTHER, loss=amp_reference.OTHER), {"2.1"}),
    (Config(loss=None), {"2.1"}),
    (Config(backward=amp_reference.GIVEN), {"2.2"}),
    (Config(scaled=False), {"2.3"}),
    (Config(zero_grad="never"), {"2.4"}),
    (Config(zero_grad="after_backward"), {"2.4"} | MASKS_STEP),
    (Config(zero_grad="after_step"), {"2.4"}),
    (Config(step="direct"), {"2.5", "2.6"}),
    (Config(step="direct", clipping="unscale_always"), {"2.5", "2.6"}),  # update's order has no effect
    (Config(update="never"), {"2.6"}),
    (Config(update="before_step"), {"2.5", "2.6"}),  # refused before any step: no call steps
    (Config(update="twice"), {"2.6"}),  # torch refuses the second: the call ends there, as in a real loop
    (Config(update="when_clean"), {"2.6"}),
    (Config(clipping="unscale_twice"), {"2.7"}),
    (Config(clipping="after_step"), {"2.7"}),
    # the refused second step ends every call before update(): when update() runs cannot be seen
    (Config(step="twice"), {"2.5", "2.6"}),
    (Config(clipping="clip_then_unscale"), {"2.7"}),
    (Config(clipping="clip_only"), {"2.7"}),
    (Config(clipping="no_clip"), {"2.7"}),
    (Config(forward=None, loss=None, half_model=True), {"2.1", "2.5"} | MASKS_STEP),
]


@pytest.mark.parametrize("config,rows", SINGLE_BUGS, ids=[amp_reference.describe_config(c, BASE) for c, _ in SINGLE_BUGS])
def test_one_cause_one_deduction(config: Config, rows: set[str]) -> None:
    """An honest bug costs its own row: the replay of the log's configuration reproduces it elsewhere."""
    assert failing_rows(reference_amp_step(config)) == rows


def test_an_amp_step_that_never_steps_loses_row_2_7() -> None:
    assert failing_rows(reference_amp_step(Config(step="never"))) == {"2.5"} | MASKS_STEP
    verdict = judge("2.7", ROW_ARGS["2.7"], run(ROW_ARGS["2.7"], reference_amp_step(Config(step="never"))))
    assert verdict.lines and not verdict.masked_by  # the replay steps: the parameters differ


def test_a_masked_row_says_which_behaviour_masks_it() -> None:
    verdict = judge("2.6", ROW_ARGS["2.6"], run(ROW_ARGS["2.6"], reference_amp_step(Config(zero_grad="after_backward"))))
    assert verdict.masked_by == "zero_grad after backward"


# --------------------------------------------------------------------------- forged records


def do_nothing(*args: Any, **kwargs: Any) -> torch.Tensor:
    return torch.zeros(())


@pytest.mark.parametrize("row", ROWS)
def test_records_of_a_correct_run_earn_nothing(row: str) -> None:
    """The log of a correct run next to the effects of an amp_step that does nothing fails every row."""
    args = ROW_ARGS[row]
    forged = run(args, do_nothing)
    forged["log"] = copy.deepcopy(amp_reference.replay(args, CORRECT)["log"])
    assert judge(row, args, forged)


@pytest.mark.parametrize("row", ROWS)
def test_records_claiming_any_configuration_earn_nothing(row: str) -> None:
    """Whatever configuration a forged log claims, effects of no work match none with the row set right."""
    args = ROW_ARGS[row]
    forged = run(args, do_nothing)
    for config, _ in SINGLE_BUGS:
        forged["log"] = copy.deepcopy(amp_reference.replay(args, config)["log"])
        assert judge(row, args, forged), config


@pytest.mark.parametrize("row", [row for row in ROWS if any(row in rows for _, rows in SINGLE_BUGS)])
def test_effects_of_a_wrong_program_with_right_records_lose_the_row(row: str) -> None:
    """Lying about the one behaviour that is wrong does not earn its row."""
    config = next(c for c, rows in SINGLE_BUGS if row in rows)
    args = ROW_ARGS[row]
    forged = run(args, reference_amp_step(config))
    forged["log"] = copy.deepcopy(amp_reference.replay(args, CORRECT)["log"])
    assert judge(row, args, forged)


def forward_backward_only(model: Any, inputs: Any, targets: Any, loss_fn: Any, optimizer: Any, scaler: Any, *,
                          device_type: str = "cuda", dtype: torch.dtype = torch.float16, **_: Any) -> torch.Tensor:
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    return loss.detach()


POINTS = {"2.1": 4, "2.2": 3, "2.3": 3, "2.4": 3, "2.5": 4, "2.6": 3, "2.7": 3, "2.8": 2, "2.9": 2}
FORGED_LOGS = [CORRECT, Config(zero_grad="after_backward"), Config(step="never"),
               Config(forward=None, loss=None, half_model=True), Config(step="direct"), Config(update="never"),
               Config(update="twice"), Config(step="twice")]


@pytest.mark.parametrize("program", [do_nothing, forward_backward_only, reference_amp_step(Config(step="never"))],
                         ids=["nothing", "forward_backward_only", "never_steps"])
def test_a_forged_log_scores_no_more_than_the_honest_one(program: Callable[..., Any]) -> None:
    """A forged log earns nothing, per partial program: whatever log it shows, no more points than its own log earns."""
    def points(forge: Config | None) -> int:
        total = 0
        for row, args in ROW_ARGS.items():
            result = run(args, program)
            if forge is not None:
                result["log"] = copy.deepcopy(amp_reference.replay(args, forge)["log"])
            total += 0 if judge(row, args, result) else POINTS[row]
        return total

    honest = points(None)
    assert all(points(forge) <= honest for forge in FORGED_LOGS), honest


@pytest.mark.parametrize("config,call,error", [
    (Config(update="twice"), "update", "AssertionError: No inf checks were recorded prior to update."),
    (Config(step="twice"), "step", "RuntimeError: step() has already been called since the last update()."),
    (Config(clipping="unscale_twice"), "unscale_",
     "RuntimeError: unscale_() has already been called on this optimizer since the last update()."),
    (Config(clipping="after_step"), "unscale_", "RuntimeError: unscale_() is being called after step()."),
], ids=["update twice", "step twice", "unscale_ twice", "unscale_ after step"])
def test_a_refused_call_ends_the_amp_step_call_with_torchs_error(config: Config, call: str, error: str) -> None:
    """As in a real training loop: torch's error ends the call (nothing after it runs), the log names the call."""
    args = ROW_ARGS["2.7"]
    result = run(args, reference_amp_step(config))
    step = result["steps"][0]
    assert f"{step['error']['type']}: {step['error']['message']}" == error
    assert [e["call"] for e in result["log"] if e.get("event") == "scaler error"] == [call]
    assert effects.calls_of(result)[0][-1]["event"] == "scaler error"  # nothing ran after the refusal
    if call != "update":  # a refusal before update(): the scaler never updated
        assert step["scaler"]["scale"] == 4.0 and step["scaler"]["stage"] != 0


@pytest.mark.parametrize("config,row", [(Config(update="twice"), "2.6"), (Config(step="twice"), "2.5"),
                                        (Config(clipping="unscale_twice"), "2.7"), (Config(clipping="after_step"), "2.7")],
                         ids=["update twice", "step twice", "unscale_ twice", "unscale_ after step"])
def test_a_refusal_costs_its_row_with_torchs_error_and_the_call_named(config: Config, row: str) -> None:
    verdict = judge(row, ROW_ARGS[row], run(ROW_ARGS[row], reference_amp_step(config)))
    call = {"2.5": "step", "2.6": "update", "2.7": "unscale_"}[row]
    assert verdict.lines and f"refused scaler.{call}()" in verdict.lines[0]
    assert "has already been called" in verdict.lines[0] or "No inf checks" in verdict.lines[0] \
        or "after step()" in verdict.lines[0]


def test_the_scenario_goes_on_after_a_refused_call() -> None:
    """Call 2 still runs after call 1 ended in a refusal: update() twice leaves call 2 a whole correct step too."""
    result = run(ROW_ARGS["2.4"], reference_amp_step(Config(update="twice")))
    correct = run(ROW_ARGS["2.4"], reference_amp_step(CORRECT))
    assert [("error" in s) for s in result["steps"]] == [True, True]
    assert [s["params"] for s in result["steps"]] == [s["params"] for s in correct["steps"]]


def test_a_step_refused_for_want_of_an_update_has_no_effect() -> None:
    """Without update(), call 2's one step is refused: it raises and leaves the parameters where call 1 left them."""
    result = run({**BASE, "steps": 2}, reference_amp_step(Config(update="never")))
    assert result["steps"][0]["params"] == result["steps"][1]["params"]
    assert result["steps"][1]["error"]["message"] == "step() has already been called since the last update()."


def test_update_only_when_clean_shows_expected_values_of_a_correct_step() -> None:
    """Its message's expected scaler state is what a correct amp_step gives after the overflowing call 1
    (scale halved, tracker 0, ready), not a state of some other program."""
    verdict = judge("2.6", ROW_ARGS["2.6"], run(ROW_ARGS["2.6"], reference_amp_step(Config(update="when_clean"))))
    assert verdict.lines == ["after call 1: the scaler's (scale, growth tracker, stage) should be (32768, 0, ready) "
                             "but is (65536, 0, stepped)"]  # both states as the program prints them


@pytest.mark.parametrize("config", [CORRECT, Config(update="twice"), Config(update="when_clean"),
                                    Config(zero_grad="never"), Config(forward=None, loss=None)],
                         ids=["correct", "update twice", "update when clean", "no zero_grad", "no autocast"])
def test_underflow_calls_are_replayed_as_amp_steps(config: Config) -> None:
    """Row 2.10 replays every call from the state the previous one left: an honest amp_step's calls, bugs of other
    rows included, are all reproduced (a refused call ends that call, training goes on)."""
    args = {"steps": 30, "scaler_kwargs": {"growth_interval": 10}}
    result = json.loads(json.dumps(probes.run_underflow(args, reference_amp_step(config), harness.torch_scaler)))
    assert underflow_steps.judge_calls(args, result) is None


def test_underflow_weight_written_by_hand_is_no_amp_step() -> None:
    """An amp_step that steps correctly but writes the least-squares answer into the weight reaches the target
    loss, and the replay of its calls says which call did something no amp_step does."""
    correct = reference_amp_step(CORRECT)

    def writes_answer(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        loss = correct(model, inputs, targets, *args, **kwargs)
        with torch.no_grad():
            model.weight.copy_(torch.linalg.lstsq(inputs.double(), targets.double()).solution.t().float())
        return loss

    args = {"steps": 5, "scaler_kwargs": {"growth_interval": 10}}
    result = json.loads(json.dumps(probes.run_underflow(args, writes_answer, harness.torch_scaler)))
    assert probes.underflow_loss(args, result["final_weight"]) < 1e-12
    assert underflow_steps.judge_calls(args, result).startswith("call 1 did not do")


# --------------------------------------------------------------------------- objects that are not plain data


class Liar(torch.Tensor):
    """A tensor subclass that answers every torch function with zeros."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return torch.zeros(())


def returns_subclass(*args: Any, **kwargs: Any) -> Any:
    loss = reference_amp_step(CORRECT)(*args, **kwargs)
    return loss.as_subclass(Liar)


def test_a_returned_tensor_subclass_is_reported_and_never_read() -> None:
    result = run(ROW_ARGS["2.8"], returns_subclass)
    assert result["steps"][0]["ok"] == {"type": "Tensor subclass Liar"}
    assert any("Tensor subclass" in line for line in judge("2.8", ROW_ARGS["2.8"], result).lines)


def relabels_parameters(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    loss = reference_amp_step(CORRECT)(model, *args, **kwargs)
    for param in model.parameters():
        param.__class__ = Liar
    return loss


def test_a_parameter_relabelled_as_a_subclass_is_not_copied_out() -> None:
    result = run(ROW_ARGS["2.6"], relabels_parameters)
    assert all(isinstance(p, str) and "Liar" in p for p in result["steps"][0]["params"])
    assert judge("2.6", ROW_ARGS["2.6"], result)


def test_underflow_weight_relabelled_as_a_subclass_earns_nothing() -> None:
    """A relabelled weight must not lower the measured loss: the harness's own final-loss measurement must not read the subclass's 0.0."""
    def amp_step(model: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        loss = reference_amp_step(CORRECT)(model, *args, **kwargs)
        model.weight.__class__ = Liar
        return loss

    result = probes.run_underflow({"steps": 1}, amp_step, harness.torch_scaler)
    assert isinstance(result["final_weight"], str) and "Liar" in result["final_weight"]


def test_underflow_final_loss_is_measured_by_the_judge() -> None:
    args = {"steps": 120, "scaler_kwargs": {"growth_interval": 10}}
    good = probes.run_underflow(args, reference_amp_step(CORRECT), harness.torch_scaler)
    stalled = probes.run_underflow(args, reference_amp_step(Config(scaled=False)), harness.torch_scaler)
    assert probes.underflow_loss(args, good["final_weight"]) < 1e-12
    assert probes.underflow_loss(args, stalled["final_weight"]) > 1e-11


# --------------------------------------------------------------------------- reply shapes


def test_probe_replies_pass_the_shape_check_and_malformed_ones_do_not() -> None:
    args = ROW_ARGS["2.5"]
    result = run(args, reference_amp_step(CORRECT))
    assert replies.problem("amp_probe", args, result) is None
    bad = copy.deepcopy(result)
    bad["steps"][0]["params"] = [{"values": [0.0]}]
    assert replies.problem("amp_probe", args, bad)
    bad = copy.deepcopy(result)
    bad["steps"][0]["scaler"] = {"scale": "65536", "tracker": 0}
    assert replies.problem("amp_probe", args, bad)
    bad = copy.deepcopy(result)
    bad["steps"][0]["ok"] = {"type": "Tensor", "value": "0.5"}
    assert replies.problem("amp_probe", args, bad)
    underflow = json.loads(json.dumps(probes.run_underflow({"steps": 2}, reference_amp_step(CORRECT),
                                                           harness.torch_scaler)))
    assert replies.problem("underflow", {}, underflow) is None
    assert replies.problem("underflow", {}, {**underflow, "final_weight": [[0.0]]})


def test_configs_are_distinct_in_effects() -> None:
    """Each single bug changes the effects of its row's scenario (else its row could not see it)."""
    for config, rows in SINGLE_BUGS:
        args = ROW_ARGS[min(rows)]
        assert effects.differences(amp_reference.replay(args, CORRECT), amp_reference.replay(args, config)), \
            dataclasses.asdict(config)


def test_copy_out_reads_true_values_under_a_lying_dispatch_mode() -> None:
    """A dispatch mode that rewrites every result (what code reaching torch's private modules could push)
    does not change what the harness copies out, and is active again afterwards."""
    from torch.utils._python_dispatch import TorchDispatchMode, _len_torch_dispatch_stack

    class Lies(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            return out.fill_(7.0) if isinstance(out, torch.Tensor) and out.is_floating_point() else out

    grad = torch.tensor([1.5, -2.0], dtype=torch.float16)
    tracker = torch.tensor([3], dtype=torch.int32)
    with Lies():
        assert torch.ones(2).tolist() == [7.0, 7.0]  # the mode is real: it lies to everyone else
        assert harness.tensors_values([grad, tracker]) == [[1.5, -2.0], [3.0]]
        assert all(type(v) is float for v in harness.tensor_values(tracker))
        assert _len_torch_dispatch_stack() == 1
    assert _len_torch_dispatch_stack() == 0
    assert harness.tensor_values(grad) == [1.5, -2.0]  # and without a mode, the cheap path


@pytest.mark.parametrize("config,order", [
    (CORRECT, "backward (no autocast) -> unscale_ -> clip_grad_norm_ -> scaler.step"),
    (Config(clipping="clip_then_unscale"), "backward (no autocast) -> clip_grad_norm_ -> unscale_ -> scaler.step"),
], ids=["unscale then clip", "clip then unscale"])
def test_the_call_trace_shows_clipping_where_it_ran(config: Config, order: str) -> None:
    """A wrong clipping order does not read as the right one: clip_grad_norm_ is in the trace, in its place."""
    result = run(ROW_ARGS["2.7"], reference_amp_step(config))
    assert order in effects.call_order(result, 0)


def test_clipping_imported_by_name_reports_too_and_clipping_outside_a_probe_call_records_nothing() -> None:
    from torch.nn.utils import clip_grad_norm_  # as a submission would, after the probe module was imported

    def clips_by_name(model: Any, inputs: Any, targets: Any, loss_fn: Any, optimizer: Any, scaler: Any, *,
                      device_type: str = "cuda", dtype: torch.dtype = torch.float16, max_grad_norm: Any = None) -> Any:
        optimizer.zero_grad()
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    result = run(ROW_ARGS["2.7"], clips_by_name)
    assert "unscale_ -> clip_grad_norm_ -> scaler.step" in effects.call_order(result, 0)
    assert not judge("2.7", ROW_ARGS["2.7"], result)
    assert not probes._CALL_LOG  # no log stays active after the probe
    layer = torch.nn.Linear(2, 2)
    layer.weight.grad = torch.full((2, 2), 3.0)
    assert float(clip_grad_norm_([layer.weight], 1.0)) == 6.0 and not probes._CALL_LOG


@pytest.mark.parametrize("config,rows", SINGLE_BUGS, ids=[amp_reference.describe_config(c, BASE) for c, _ in SINGLE_BUGS])
def test_a_message_describes_one_call_whose_inputs_the_replay_shared(config: Config, rows: set[str]) -> None:
    """Only the first differing call is described: before it the submission and the replay were in the same state,
    so every expected value shown is what the replay (right on the row) does in that very situation."""
    import re

    for row in rows:
        verdict = judge(row, ROW_ARGS[row], run(ROW_ARGS[row], reference_amp_step(config)))
        calls = {int(n) for line in verdict.lines for n in re.findall(r"^(?:after )?call (\d+)", line)}
        assert len(calls) <= 1, (row, verdict.lines)
