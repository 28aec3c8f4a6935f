"""Part 4 (GPU): your ``amp_step`` with torch's real ``GradScaler`` on an NVIDIA GPU.

* 4.1  float16 autocast + ``torch.amp.GradScaler("cuda")`` through your ``amp_step`` trains the
       model to the loss that float32 (TF32 off) reaches in as many steps, clearly sooner;
* 4.2  on a task whose float16 gradients underflow, training without a scaler stalls and
       training with ``GradScaler("cuda")`` through your ``amp_step`` converges;
* 4.3  your ``ToyLossScaler`` on CUDA tensors matches ``torch.amp.GradScaler("cuda")`` exactly.

Run them on a machine with CUDA, from ``assignment/``:  ``python -m pytest -m gpu -s``
(``-s`` prints the measured times).  Without CUDA they are skipped.  ``AMP_GPU_DRY=1``
runs the same code on the CPU (tiny sizes, CPU autocast, no speed claim), and
``AMP_GPU_MIN_SPEEDUP`` (default 1.5) sets the speed-up that 4.1 requires on a GPU.
Staff grade this part on a GPU; on Gradescope it shows as an informational row.

What is measured, and where.  The grader runs your code in a separate sandboxed process and
takes nothing that process computes, times or counts as a grade: only effects it measures itself.

* Losses: after each training run the process copies out the model's weights (their exact
  float32 values); this side rebuilds the model on its CPU and computes the loss itself, on an
  evaluation batch of its own (4.1: fresh inputs of the task, drawn after the runs from a secret
  of this side's, which your process never sees), or over the task's data (4.2).
  The value ``amp_step`` returns is never used here (row 2.8 checks it): an ``amp_step`` that
  trains correctly gets this part's points whatever it returns.
* Steps, not end states: 4.1's weights must lie where the float32 run of the same seed ends, up
  to AMP's rounding (:data:`MAX_DISTANCE` of how far training moved them), and each of 4.2's steps
  must follow from the one before by an AMP step on the task's data (replayed by the trusted
  reference, :func:`checks.judge.gpu_reference.underflow_steps`): weights written into the model
  some other way earn nothing.
* Whose fault: a device failure your process reports outside your code is checked here by rerunning
  the grader's side of the scenario without your code on the same device; only if that fails too
  is the submission left ungraded.
* Time (4.1): the wall time of each call's round trip, measured on this side around the call:
  one call trains ``steps`` steps from a fresh seed and copies the weights out.  The float32
  baseline is timed the same way, in a sandboxed process that imports no file of yours (and
  after every process of your submission has been stopped); each process first makes an untimed
  warm-up call.  Why round trips rather than timings taken inside the process: your code may
  change anything in its own process (clocks included), but it cannot make the reply arrive
  sooner without the work that produces those weights.  Each timed run gets a seed drawn here just
  before the call, so the weights cannot be computed ahead (in a warm-up, or in your files); and a
  run counts only if this side's own loss of its weights reaches float32's.  The round trip also
  holds building the data and model and copying the weights out, the same for both; it only
  lowers the measured speed-up.  What this cannot tell apart: code that reaches the loss sooner by
  doing less honest work per step (training on part of each batch, say) -- no effect distinguishes
  it from a faster step.

The references of 4.2 and 4.3 (the unscaled baseline, ``GradScaler("cuda")``) never run in the
process that runs your code: here they run in this process, in the grader in a separate trusted
process (:mod:`checks.judge.gpu_reference`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import statistics
import time
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from checks.judge import expect, gpu_losses, gpu_reference, cases
from checks.runners import gpu_runs, probes
from checks.words import say

pytestmark = pytest.mark.gpu

MIN_SPEEDUP_ENV = "AMP_GPU_MIN_SPEEDUP"
#: AMP's final loss may differ from fp32's by 10 % of fp32's final loss or 2 % of its initial loss.
FINAL_REL_TOL, FINAL_TOL_OF_INITIAL = 0.10, 0.02
#: How far 4.1's AMP weights may lie from the float32 run's (same seed, same batches), as a fraction of how far the
#: float32 run moved them: honest AMP runs stay within ~0.25 on the dry mode's tiny model with its large step
#: (~0.01 at the GPU's sizes); weights fitted any other way lie about 1 or more away.
MAX_DISTANCE = 0.5
SPEED_TIMEOUT_S = 600.0


def min_speedup() -> float:
    return float(os.environ.get(MIN_SPEEDUP_ENV, "1.5"))


@pytest.fixture(scope="module")
def device(student: Any) -> str:
    """"cuda", or "cpu" in dry mode; skips the GPU checks where there is no CUDA.

    The grader's runner says which (its preflight checked the device in a student process),
    so the judge never asks CUDA anything itself.
    """
    given = getattr(student, "device", None)
    if given:
        return str(given)
    if gpu_runs.dry_mode():
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip("GPU check: needs an NVIDIA GPU with CUDA, and torch.cuda.is_available() is False here. "
                    "Staff grade this part on a GPU. Set AMP_GPU_DRY=1 to run the same code on the CPU (no timing).")
    return "cuda"


@pytest.fixture(scope="module")
def reference(student: Any) -> Any:
    """Where the trusted references run: the grader's reference process, or this process locally."""
    return getattr(student, "reference", None) or gpu_reference.InProcessReference()


def answered(student: Any, scenario: str, args: dict[str, Any], got: Any) -> Any:
    """The student process's answer to ``scenario`` with ``args``.

    When it claims a device failure outside the student's code (``{"grader_fault": ...}``, see
    checks.runners.gpu_runs), the claim decides nothing: the runner's canary (the grader's side of the
    scenario without student code, on the same device) does.  If the canary runs, the failure was the
    submission's: it is answered as the student's error.  If it fails too, GraderFault (not the student's
    failure).  A runner without a canary (a student's local run) takes the claim as it is.
    """
    if not (isinstance(got, dict) and "grader_fault" in got):
        return got
    fault = got["grader_fault"]
    canary = getattr(student, "canary", None)
    verdict = canary(scenario, args) if canary is not None else got
    if isinstance(verdict, dict) and "grader_fault" in verdict:
        raise gpu_runs.GraderFault(f"the grader's side of the scenario failed on the device without student code "
                                   f"too ({verdict['grader_fault']['type']}: {verdict['grader_fault']['message']})\n"
                                   f"{verdict['grader_fault']['trace']}\n\nthe student process reported:\n"
                                   f"{fault['trace']}")
    return {"error": {"type": str(fault["type"])[:200], "message": str(fault["message"])[:500], "trace": ""}}


def fresh_seeds(count: int) -> list[int]:
    """Seeds drawn just before the calls that use them (see the module's docstring)."""
    return [secrets.randbelow(2**31) for _ in range(count)]


def judge_secret() -> int:
    """What the evaluation batch of 4.1 is drawn from: the operating system's randomness, in this process."""
    return secrets.randbits(62)


def timed_series(student: Any, scenario: str, warm_up: dict[str, Any], runs: list[dict[str, Any]]
                 ) -> tuple[Any, list[tuple[Any, float]]]:
    """An untimed warm-up call, then each run's call with the wall time of its round trip, in one
    student process (the runner's ``held``, where it has one, keeps it between the calls)."""
    held = getattr(student, "held", None) or contextlib.nullcontext
    with held():
        warm = answered(student, scenario, warm_up, student.run(scenario, warm_up, timeout=SPEED_TIMEOUT_S))
        timed = []
        for args in runs:
            started = time.perf_counter()
            got = student.run(scenario, args, timeout=SPEED_TIMEOUT_S)
            timed.append((got, time.perf_counter() - started))
        timed = [(answered(student, scenario, args, got), seconds) for args, (got, seconds) in zip(runs, timed)]
    return warm, timed


def _s(seconds: float) -> str:
    return f"{seconds:.3g} s"


def speed_summary(cfg: dict[str, Any], fp32: list[tuple[float, float, float]], amp: list[tuple[float, float]],
                  dry: bool) -> str:
    """What was measured: per timed run, the round trip's wall time and the loss computed here."""
    lines = [say("gpu.measured", steps=cfg["steps"], rows=gpu_losses.EVAL_ROWS)]
    for index, (seconds, loss, initial) in enumerate(fp32):
        line = say("gpu.run", number=index + 1, seconds=_s(seconds), loss=f"{loss:.4g}", initial=f"{initial:.4g}")
        if index < len(amp):
            line += say("gpu.run_amp", seconds=_s(amp[index][0]), loss=f"{amp[index][1]:.4g}")
        lines.append(line)
    if len(amp) == len(fp32):
        speedup = statistics.median(s for s, _, _ in fp32) / statistics.median(s for s, _ in amp)
        lines.append(say("gpu.speedup", speedup=f"{speedup:.2f}") + (
            say("gpu.dry") if dry else say("gpu.required", minimum=f"{min_speedup():g}")))
    return "\n".join(lines)


def test_gpu_amp_reaches_fp32_loss_sooner(student: Any, device: str, reference: Any) -> None:
    cfg = gpu_runs.speed_config(device)
    kind = gpu_runs.device_type(device)
    dry = kind != "cuda"
    seeds = fresh_seeds(1 + int(cfg["repeats"]))
    warm_up = {**cfg, "seed": seeds[0], "steps": int(cfg["warmup"])}
    runs = [{**cfg, "seed": seed} for seed in seeds[1:]]
    release = getattr(student, "release", None)
    if release is not None:  # no process of the submission runs while the baseline is timed
        release()
    warm, timed = timed_series(student, "gpu_train_fp32", warm_up, runs)  # no student code in that process
    fp32_weights: list[list[torch.Tensor]] = []
    for args, got in [(warm_up, warm), *zip(runs, (got for got, _ in timed))]:
        weights = gpu_losses.decode_weights(args, got.get("weights")) if "ok" in got else str(got)[:1000]
        if isinstance(weights, str):
            raise RuntimeError(f"the float32 baseline run failed (no student code runs in its process): {weights}")
        if args is not warm_up:
            fp32_weights.append(weights)
    call = (f"amp_step(model, inputs, targets, F.mse_loss, adam, torch.amp.GradScaler({kind!r}), "
            f"device_type={kind!r}, dtype=torch.float16)")
    what = say("gpu.trained", depth=cfg["depth"], width=cfg["width"], batch=cfg["batch"], steps=cfg["steps"],
               repeats=cfg["repeats"], warmup=cfg["warmup"], device=device, call=call)
    fp32_seconds = [seconds for _, seconds in timed]
    warm, timed = timed_series(student, "gpu_train", warm_up, runs)
    amp_weights: list[list[torch.Tensor]] = []
    for args, got in [(warm_up, warm), *zip(runs, (got for got, _ in timed))]:
        expect.ok_or_fail(got, what)
        weights = gpu_losses.decode_weights(args, got.get("weights"))
        if isinstance(weights, str):
            expect.fail(say("gpu.not_parameters", what=what, weights=weights))
        if args is not warm_up:
            amp_weights.append(weights)
    secret = judge_secret()  # drawn after every run, never sent: the evaluation batch is the judge's alone
    fp32 = [(seconds, gpu_losses.evaluation_loss(args, secret, weights), gpu_losses.evaluation_loss(args, secret))
            for args, seconds, weights in zip(runs, fp32_seconds, fp32_weights)]
    for _, loss, initial in fp32:
        if not loss < 0.5 * initial:
            raise RuntimeError(f"the float32 baseline did not learn (loss {loss:.4g} from {initial:.4g}): 4.1 cannot "
                               "compare AMP with it")
    amp = [(seconds, gpu_losses.evaluation_loss(args, secret, weights))
           for args, (_, seconds), weights in zip(runs, timed, amp_weights)]
    summary = speed_summary(cfg, fp32, amp, dry)
    print(f"\n{summary}")
    for index, ((_, loss32, initial), (_, loss)) in enumerate(zip(fp32, amp)):
        tolerance = max(FINAL_REL_TOL * loss32, FINAL_TOL_OF_INITIAL * initial)
        if not loss <= loss32 + tolerance:  # NaN fails too
            expect.fail(say("gpu.loss", what=what, number=index + 1, loss=f"{loss:.4g}", steps=cfg["steps"],
                            loss32=f"{loss32:.4g}", allowed=f"{loss32 + tolerance:.4g}", initial=f"{initial:.4g}",
                            summary=summary))
    for index, (args, weights, weights32) in enumerate(zip(runs, amp_weights, fp32_weights)):
        distance = gpu_losses.distance_from_training(args, weights, weights32)
        if not distance <= MAX_DISTANCE:  # NaN fails too
            expect.fail(say("gpu.not_trained", what=what, number=index + 1, distance=f"{distance:.3g}",
                            allowed=f"{MAX_DISTANCE:g}", steps=cfg["steps"], summary=summary))
    if not dry:
        speedup = statistics.median(s for s, _, _ in fp32) / statistics.median(s for s, _ in amp)
        if speedup < min_speedup():
            expect.fail(say("gpu.slow", what=what, speedup=f"{speedup:.2f}", minimum=f"{min_speedup():g}",
                            summary=summary))


def _weight_loss(args: dict[str, Any], weight: Any) -> float | None:
    """The underflow task's float32 loss of a copied-out weight, computed here; None if it is not plain values."""
    if not (isinstance(weight, list) and len(weight) == int(args.get("d", 16))):
        return None
    return probes.underflow_loss(args, weight)


def test_gpu_underflow_needs_the_scaler(student: Any, device: str, reference: Any) -> None:
    args = gpu_runs.underflow_args(device)
    baseline = reference.call("underflow_baseline", args)  # trusted: no scaler, no student code
    unscaled = _weight_loss(args, baseline.get("final_weight"))
    if unscaled is None or not unscaled > 1e-11:
        raise RuntimeError(f"the unscaled float16 baseline did not stall on {device} (final loss {unscaled}): "
                           "the underflow check cannot tell a scaler's effect here")
    kind = gpu_runs.device_type(device)
    what = say("gpu.underflow", kind=kind, steps=args["steps"], kind_repr=repr(kind))
    result = answered(student, "gpu_underflow", args, student.run("gpu_underflow", args, timeout=120))
    expect.ok_or_fail(result, what)
    final = _weight_loss(args, result["final_weight"])
    if final is None:
        expect.fail(say("gpu.underflow_weight", what=what, weight=str(result["final_weight"])[:200]))
    if not final < 1e-12:
        expect.fail(say("gpu.underflow_stalled", what=what, n=args.get("n", 4096), final=f"{final:.3g}",
                        unscaled=f"{unscaled:.3g}"))
    weights = result.get("weights") or []
    if not (len(weights) == args["steps"] and all(_weight_loss(args, w) is not None for w in weights)
            and weights[-1] == result["final_weight"]):
        expect.fail(say("gpu.underflow_no_steps", what=what, steps=args["steps"]))
    wrong = reference.call("underflow_steps", {**args, "weights": weights})  # trusted: replays each step
    if wrong is not None:
        expect.fail(say("gpu.underflow_not_amp", what=what, step=int(wrong) + 1))


@given(powers_of_two=st.booleans(), data=st.data())
def test_gpu_toy_scaler_matches_cuda_gradscaler(student: Any, device: str, reference: Any, powers_of_two: bool,
                                               data: st.DataObject) -> None:
    scenario = data.draw(cases.generated_scenarios(powers_of_two))
    scenario["world"]["device"] = device
    expected = reference.call("scaler_ops", scenario)  # torch's GradScaler, never in the student's process
    got = answered(student, "gpu_scaler_ops", scenario, student.run("gpu_scaler_ops", scenario))
    kind = gpu_runs.device_type(device)
    what = (f"With every parameter, gradient and scaled tensor on {kind!r} (add device={kind!r} to each tensor below), "
            f"your scaler must behave exactly like torch.amp.GradScaler({kind!r}): the same scale, tracker and skipped "
            "steps (exactly for power-of-two factors, to 1e-6 otherwise), parameters to 1e-6.")
    expect.check_results(scenario, expected, got, rel=0.0 if powers_of_two else 1e-6, only=["observe", "step"],
                         what=what)
    expect.check_results(scenario, expected, got, rel=1e-6, what=what)
