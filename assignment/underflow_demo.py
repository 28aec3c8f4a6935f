"""Watch float16 gradient underflow stall training, and a loss scaler rescue it.

A tiny linear regression whose targets are scaled down by 1e-4 is trained twice,
with float32 weights and the forward pass + loss under ``torch.autocast`` (float16):

* without loss scaling, and
* with a dynamic loss scaler (``torch.amp.GradScaler``, or your own
  ``ToyLossScaler`` + ``amp_step`` with ``--mine``).

What to notice: float16's smallest subnormal is 2**-24 (about 6e-8); anything below
about 3e-8 rounds to exactly zero.  Here the gradient of the loss with respect to
the model output is ``2 * (output - target) / N``, a few times 1e-9 once the model
gets close, so without scaling it silently becomes 0.0: the weight gradient is
exactly zero from about step 33 on and the loss freezes near 3e-10.  Multiplying the
loss by 65536 first lifts those gradients back into float16's range; the loss keeps
falling by four more orders of magnitude.  No error, no warning: underflow is silent.

Usage: ``python underflow_demo.py [--mine] [--plot PATH] [--steps N]`` (``--mine``
uses your ToyLossScaler and amp_step from this folder instead of torch's GradScaler).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

HERE = Path(__file__).resolve().parent
TABLE_STEPS = (0, 10, 25, 33, 50, 100, 199)
StepFn = Callable[..., torch.Tensor]


@dataclass
class DemoResult:
    """What one training run produced (``scales`` is empty without a scaler)."""

    losses: list[float]
    first_zero_grad_step: int | None  # first step whose weight gradient was exactly 0
    final_loss: float
    zero_grad: list[bool] = field(default_factory=list)  # per step: was the grad all 0?
    scales: list[float] = field(default_factory=list)


def _plain_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Any,
                optimizer: torch.optim.Optimizer, scaler: Any) -> torch.Tensor:
    """One autocast iteration; uses ``scaler`` if it is not None."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.detach()


def run_demo(steps: int = 200, use_scaler: bool = False,
             scaler_factory: Callable[[], Any] | None = None,
             step_fn: StepFn | None = None) -> DemoResult:
    """Train the underflow-prone regression for ``steps`` steps and record the losses.

    ``scaler_factory`` defaults to ``torch.amp.GradScaler("cpu", growth_interval=20)``;
    ``step_fn`` (e.g. your ``amp_step``) defaults to a plain AMP iteration.
    """
    torch.manual_seed(0)
    n, d = 4096, 16
    x = torch.randn(n, d)
    y = x @ torch.randn(d, 1) * 1e-4
    model = torch.nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.25)
    loss_fn = torch.nn.functional.mse_loss
    default = lambda: torch.amp.GradScaler("cpu", growth_interval=20)  # noqa: E731
    scaler = (scaler_factory or default)() if use_scaler else None
    losses: list[float] = []
    zero_grad: list[bool] = []
    scales: list[float] = []  # the scale each step's loss was multiplied by
    for _ in range(steps):
        if scaler is not None:
            scales.append(float(scaler.get_scale()))
        if step_fn is None or scaler is None:
            loss = _plain_step(model, x, y, loss_fn, optimizer, scaler)
        else:
            loss = step_fn(model, x, y, loss_fn, optimizer, scaler, device_type="cpu",
                           dtype=torch.float16)
        losses.append(float(loss))
        grad = model.weight.grad
        zero_grad.append(grad is not None and not bool(grad.any()))
    first = zero_grad.index(True) if True in zero_grad else None
    return DemoResult(losses, first, losses[-1] if losses else float("nan"), zero_grad, scales)


def _load(name: str) -> ModuleType:
    """Import ``name``.py from this folder under a private name (no clash with yours)."""
    spec = importlib.util.spec_from_file_location(f"_underflow_demo_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _plot(path: str, plain: DemoResult, scaled: DemoResult, label: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return print("(matplotlib is not installed: no plot)")
    fig, ax = plt.subplots(figsize=(7, 4))  # log-scale y: the losses span 7 decades
    ax.semilogy(plain.losses, label="fp16 autocast, no loss scaling")
    ax.semilogy(scaled.losses, label=f"fp16 autocast + {label}")
    if plain.first_zero_grad_step is not None:
        ax.axvline(plain.first_zero_grad_step, color="grey", linestyle=":",
                   label=f"gradient underflows to 0 (step {plain.first_zero_grad_step})")
    ax.set(xlabel="step", ylabel="MSE loss (log scale)", title="float16 gradient underflow")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"Loss curves saved to {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mine", action="store_true", help="use your ToyLossScaler and amp_step")
    parser.add_argument("--plot", default="underflow_demo.png", help="PNG path for the loss curves")
    parser.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    factory, step_fn, label = None, None, "torch.amp.GradScaler"
    try:
        if args.mine:
            toy_scaler = _load("loss_scaler").ToyLossScaler
            step_fn, label = _load("amp_step").amp_step, "your ToyLossScaler + amp_step"
            factory = lambda: toy_scaler(growth_interval=20)  # noqa: E731
        plain = run_demo(args.steps, use_scaler=False)
        scaled = run_demo(args.steps, use_scaler=True, scaler_factory=factory, step_fn=step_fn)
    except (NotImplementedError, FileNotFoundError) as exc:
        print(f"Cannot run --mine yet ({type(exc).__name__}: {str(exc) or 'not implemented'}).\n"
              "Finish Task 1 (loss_scaler.py) and Task 2 (amp_step.py), then run --mine again.")
        return 1
    print(f"{'step':>5} | {'loss, no scaler':>15} | {'loss, scaler':>13} | {'scale':>9}")
    print("-" * 52)
    for step in sorted({s for s in TABLE_STEPS if s < args.steps} | {args.steps - 1}):
        print(f"{step:>5} | {plain.losses[step]:>15.3e} | {scaled.losses[step]:>13.3e} | "
              f"{scaled.scales[step]:>9.0f}")
    when = (f"underflowed to exactly zero at step {plain.first_zero_grad_step}"
            if plain.first_zero_grad_step is not None else "never underflowed to zero")
    ratio = plain.final_loss / scaled.final_loss if scaled.final_loss > 0 else float("inf")
    print(f"\nVerdict: without scaling the weight gradient {when} and the loss ended at "
          f"{plain.final_loss:.2e}; with {label} it reached {scaled.final_loss:.2e} "
          f"({ratio:,.0f}x lower).")
    _plot(args.plot, plain, scaled, label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
