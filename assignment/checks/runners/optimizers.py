"""The harness's optimizers: test doubles that behave like ``torch.optim.SGD`` and record their calls.

Like :mod:`checks.runners.harness`, this module imports nothing but torch and the standard library.
"""

from __future__ import annotations

import functools
import math
from itertools import chain
from typing import Any, Callable

import torch
from torch.optim import optimizer as _torch_optimizer

Json = Any


def _without_dynamo_guard(method: Callable[..., Any]) -> Callable[..., Any]:
    """The plain function under torch's ``torch._disable_dynamo`` wrapper (itself if there is none)."""
    return getattr(method, "__wrapped__", method)


#: torch's registries of global step hooks (``torch.optim.optimizer.register_optimizer_step_pre_hook`` and
#: ``..._post_hook``); None if this torch keeps them elsewhere, and then :func:`_step_with_hooks` leaves
#: the step to torch's own wrapper.
_GLOBAL_PRE_HOOKS = getattr(_torch_optimizer, "_global_optimizer_pre_hooks", None)
_GLOBAL_POST_HOOKS = getattr(_torch_optimizer, "_global_optimizer_post_hooks", None)


def _step_with_hooks(step: Callable[..., Any]) -> Callable[..., Any]:
    """``step`` wrapped as torch's ``Optimizer.profile_hook_step`` wraps it, minus the profiler label.

    torch wraps the ``step`` of every optimizer class on its first instance: the step hooks
    (global and the optimizer's own, pre and post, in torch's order and with its rules), around
    them ``torch.autograd.profiler.record_function``, a label only a running profiler reads and
    which costs more than a plain step of the harness's small models.  This wrapper runs the same
    hooks without the label, and is marked ``hooked`` so that torch leaves it as it is.
    """
    if _GLOBAL_PRE_HOOKS is None or _GLOBAL_POST_HOOKS is None:
        return step  # torch wraps it, label included, as before

    @functools.wraps(step)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        for pre_hook in chain(_GLOBAL_PRE_HOOKS.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise RuntimeError(f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
        out = step(*args, **kwargs)
        self._optimizer_step_code()
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _GLOBAL_POST_HOOKS.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True  # type: ignore[attr-defined] - what torch's Optimizer._patch_step_function looks for
    return wrapper


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

    @_step_with_hooks
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        return self._plain_step(closure)

    def _plain_step(self, closure: Any) -> Any:
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

    @_step_with_hooks
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        self._step_calls += 1
        if self._log is not None:
            grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
            norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads)) if grads else 0.0
            self._log.append({"event": "optimizer.step", "via_scaler": self._inside_scaler_step, "grad_norm": norm})
        self._plain_step(closure)  # not super().step: the step hooks run once per step, around this one
        return 1000.0 + self._step_calls
