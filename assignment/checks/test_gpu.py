"""Part 4 (GPU): your ``amp_step`` with torch's real ``GradScaler`` on an NVIDIA GPU.

* 4.1  float16 autocast + ``torch.amp.GradScaler("cuda")`` through your ``amp_step``
       reaches a loss that float32 (TF32 off) reaches, clearly sooner, and ends close to it;
* 4.2  on a task whose float16 gradients underflow, training without a scaler stalls and
       training with ``GradScaler("cuda")`` through your ``amp_step`` converges;
* 4.3  your ``ToyLossScaler`` on CUDA tensors matches ``torch.amp.GradScaler("cuda")`` exactly.

Run them on a machine with CUDA, from ``assignment/``:  ``python -m pytest -m gpu -s``
(``-s`` prints the measured times).  Without CUDA they are skipped.  ``AMP_GPU_DRY=1``
runs the same code on the CPU (tiny sizes, CPU autocast, no speed claim), and
``AMP_GPU_MIN_SPEEDUP`` (default 1.5) sets the speed-up that 4.1 requires on a GPU.
Staff grade this part on a GPU; on Gradescope it shows as an informational row.

The references (the float32 run, the unscaled baseline, ``GradScaler("cuda")``) never run
in the process that runs your code: here they run in this process, in the grader in a
separate trusted process (:mod:`checks.gpu_reference`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from checks import expect, gpu_reference, gpu_scenarios, scenarios

pytestmark = pytest.mark.gpu

MIN_SPEEDUP_ENV = "AMP_GPU_MIN_SPEEDUP"
#: AMP's final loss may differ from fp32's by 10 % of fp32's final loss or 2 % of its initial loss.
FINAL_REL_TOL, FINAL_TOL_OF_INITIAL = 0.10, 0.02
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
    if gpu_scenarios.dry_mode():
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip("GPU check: needs an NVIDIA GPU with CUDA, and torch.cuda.is_available() is False here. "
                    "Staff grade this part on a GPU. Set AMP_GPU_DRY=1 to run the same code on the CPU (no timing).")
    return "cuda"


@pytest.fixture(scope="module")
def reference(student: Any) -> Any:
    """Where the trusted references run: the grader's reference process, or this process locally."""
    return getattr(student, "reference", None) or gpu_reference.InProcessReference()


def answered(got: Any) -> Any:
    """The student process's answer; GraderFault (not the student's failure) when the grader's side of
    the scenario failed on the device there (see checks.gpu_scenarios)."""
    if isinstance(got, dict) and "grader_fault" in got:
        fault = got["grader_fault"]
        raise gpu_scenarios.GraderFault(f"the grader's side of the scenario failed in the student process "
                                        f"({fault['type']}: {fault['message']})\n{fault['trace']}")
    return got


def _ms(value: float | None) -> str:
    return "never" if value is None else f"{value / 1000:.3g} s"


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def speed_summary(reference: dict[str, Any], amp: dict[str, Any], dry: bool) -> str:
    info, fp32 = reference["device_info"], reference["fp32"]
    lines = [f"Device: {info['name']} (torch {info['torch']}, CUDA {info['cuda']}); "
             f"{reference['tf32']['text']} in the fp32 baseline.",
             f"Target loss {reference['target']:.4g}: the fp32 run reaches it (smoothed over "
             f"{reference['config']['window']} steps).",
             f"fp32 (TF32 off):    {fp32['median_step_ms']:.3g} ms/step, target reached after "
             f"{_ms(fp32['time_to_target_ms'])} ({fp32['steps_to_target']} steps), final loss {_loss(fp32['final_loss'])}"]
    if amp:
        lines.append(f"AMP (float16 + GradScaler): {amp['median_step_ms']:.3g} ms/step, target reached after "
                     f"{_ms(amp['time_to_target_ms'])} ({amp['steps_to_target']} steps), final loss "
                     f"{_loss(amp['final_loss'])}, {amp['skipped_steps']} step(s) skipped by the scaler")
        if fp32["time_to_target_ms"] and amp["time_to_target_ms"]:
            speedup = fp32["time_to_target_ms"] / amp["time_to_target_ms"]
            lines.append(f"Speed-up to the target: {speedup:.2f}x " + (
                "(dry mode on the CPU: not checked)" if dry else f"(required: at least {min_speedup():g}x)"))
    return "\n".join(lines)


def test_gpu_amp_reaches_fp32_loss_sooner(student: Any, device: str, reference: Any) -> None:
    cfg = gpu_scenarios.speed_config(device)
    baseline = reference.call("fp32", cfg)  # trusted: no student code involved
    fp32 = baseline.get("fp32", {})
    if fp32.get("time_to_target_ms") is None:
        raise RuntimeError(f"the fp32 reference run did not reach its own target: {str(fp32)[:500]}")
    kind = gpu_scenarios.device_type(device)
    dry = kind != "cuda"
    call = (f"amp_step(model, inputs, targets, F.mse_loss, adam, torch.amp.GradScaler({kind!r}), "
            f"device_type={kind!r}, dtype=torch.float16)")
    what = (f"We trained a {cfg['depth']}-hidden-layer MLP (width {cfg['width']}, batch {cfg['batch']}) for "
            f"{cfg['steps']} steps, {cfg['repeats']} times, on {baseline['device_info']['name']} with\n    {call}\n")
    started = time.monotonic()
    got = answered(student.run("gpu_speed", {**cfg, "modes": ["amp"], "target": baseline["target"]},
                               timeout=SPEED_TIMEOUT_S))
    outer_s = time.monotonic() - started
    amp = got.get("amp", {"error": {"type": "RuntimeError", "message": "no AMP result came back", "trace": ""}})
    expect.ok_or_fail(amp if "error" in amp else {"ok": amp}, what)
    summary = speed_summary(baseline, amp, dry)
    print(f"\n{summary}\n(the AMP call took {outer_s:.1f} s in all, warm-up and repeats included)")
    if amp["time_to_target_ms"] is None:
        expect.fail(f"{what}but the loss never reached the target {baseline['target']:.4g} that the float32 run "
                    f"reaches in {fp32['steps_to_target']} steps. Does the optimizer step through the scaler, once per "
                    f"call, with the gradients zeroed first?\n\n{summary}")
    tolerance = max(FINAL_REL_TOL * fp32["final_loss"], FINAL_TOL_OF_INITIAL * fp32["initial_loss"])
    if not abs(amp["final_loss"] - fp32["final_loss"]) <= tolerance:  # NaN fails too
        expect.fail(f"{what}and it ended at loss {amp['final_loss']:.4g}, but float32 ends at "
                    f"{fp32['final_loss']:.4g} (allowed difference {tolerance:.3g}).\n\n{summary}")
    if not dry:
        speedup = fp32["time_to_target_ms"] / amp["time_to_target_ms"]
        if speedup < min_speedup():
            expect.fail(f"{what}AMP reached the target loss only {speedup:.2f}x sooner than float32; at least "
                        f"{min_speedup():g}x is expected on a GPU. Are the forward pass and the loss under "
                        f"torch.autocast(device_type='cuda', dtype=torch.float16)?  Does amp_step avoid syncing with "
                        f"the GPU (loss.item(), float(loss), printing) on every call?\n\n{summary}")


def test_gpu_underflow_needs_the_scaler(student: Any, device: str, reference: Any) -> None:
    args = gpu_scenarios.underflow_args(device)
    baseline = reference.call("underflow_baseline", args)  # trusted: no scaler, no student code
    unscaled = baseline["losses"][-1] if baseline.get("losses") else None
    if unscaled is None or not unscaled > 1e-11:
        raise RuntimeError(f"the unscaled float16 baseline did not stall on {device} (final loss {unscaled}): "
                           "the underflow check cannot tell a scaler's effect here")
    kind = gpu_scenarios.device_type(device)
    what = (f"We trained the underflow task (linear regression onto targets x 1e-4, float16 autocast on {kind}) for "
            f"{args['steps']} steps with your amp_step and torch.amp.GradScaler({kind!r}, growth_interval=20)")
    result = answered(student.run("gpu_underflow", args, timeout=120))
    expect.ok_or_fail(result, what)
    final = result["losses"][-1] if result["losses"] else float("nan")
    if not final < 1e-12:
        expect.fail(f"{what}. Without a scaler the float16 gradients underflow to zero and the loss stalls at "
                    f"{unscaled:.3g}; with the scaler's scaled backward it should fall below 1e-12, but it ended at "
                    f"{final:.3g}. Call backward() on scaler.scale(loss), and step through scaler.step(optimizer).")


@given(powers_of_two=st.booleans(), data=st.data())
def test_gpu_toy_scaler_matches_cuda_gradscaler(student: Any, device: str, reference: Any, powers_of_two: bool,
                                               data: st.DataObject) -> None:
    scenario = data.draw(scenarios.generated_scenarios(powers_of_two))
    scenario["world"]["device"] = device
    expected = reference.call("scaler_ops", scenario)  # torch's GradScaler, never in the student's process
    got = answered(student.run("gpu_scaler_ops", scenario))
    kind = gpu_scenarios.device_type(device)
    what = (f"With every parameter, gradient and scaled tensor on {kind!r} (add device={kind!r} to each tensor below), "
            f"your scaler must behave exactly like torch.amp.GradScaler({kind!r}): the same scale, tracker and skipped "
            "steps (exactly for power-of-two factors, to 1e-6 otherwise), parameters to 1e-6.")
    expect.check_results(scenario, expected, got, rel=0.0 if powers_of_two else 1e-6, only=["observe", "step"],
                         what=what)
    expect.check_results(scenario, expected, got, rel=1e-6, what=what)
