"""The harness's optimizers: test doubles that behave like ``torch.optim.SGD`` and record their calls.

Like :mod:`checks.runners.harness`, this module imports nothing but torch and the standard library.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

Json = Any


def _without_dynamo_guard(method: Callable[..., Any]) -> Callable[..., Any]:
    """The plain function under torch's ``torch._disable_dynamo`` wrapper (itself if there is none)."""
    return getattr(method, "__wrapped__", method)


class PlainSGD(torch.optim.SGD):
    """``torch.optim.SGD`` with its defaults (no momentum, no weight decay), minus ``torch._dynamo``.

    torch's optimizers import ``torch._dynamo`` (about 1 s, most of a check's start-up) the first
    time ``step``, ``zero_grad`` or ``add_param_group`` runs, only to tell a compiler to keep out.
    Nothing here is compiled, so this class calls the plain functions and takes the step itself:
    ``p -= lr * grad`` under ``no_grad``, the very update (same op, same rounding) that torch's
    single-tensor SGD makes for these defaults.  Anything else (momentum, ...) is refused.
    """

    add_param_group = _without_dynamo_guard(torch.optim.Optimizer.add_param_group)
    zero_grad = _without_dynamo_guard(torch.optim.Optimizer.zero_grad)
    state_dict = _without_dynamo_guard(torch.optim.Optimizer.state_dict)
    load_state_dict = _without_dynamo_guard(torch.optim.Optimizer.load_state_dict)

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, lr=lr)

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            for group in self.param_groups:
                if group["momentum"] or group["weight_decay"] or group["maximize"]:
                    raise ValueError("PlainSGD only takes plain steps (no momentum, weight decay or maximize)")
                for param in group["params"]:
                    if param.grad is not None:
                        param.add_(param.grad, alpha=-group["lr"])
        return loss


class RecordingSGD(PlainSGD):
    """SGD that records each ``step`` call and returns a recognisable token.

    Its bookkeeping (``_log``...) only explains failures: code under test could rewrite it, and
    would earn nothing by it, since every row is judged on effects the judge recomputes.
    """

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, lr=lr)
        self._step_calls = 0
        self._inside_scaler_step = False
        self._log: list[dict[str, Json]] | None = None

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        self._step_calls += 1
        if self._log is not None:
            grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
            norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads)) if grads else 0.0
            self._log.append({"event": "optimizer.step", "via_scaler": self._inside_scaler_step, "grad_norm": norm})
        super().step(closure)
        return 1000.0 + self._step_calls
