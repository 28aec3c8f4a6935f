"""Probes for ``amp_step``: a model, loss, optimizer and scaler wrapper that report what they see.

Plus the underflow training run and the run-time delegation check.  Like
:mod:`checks.harness`, everything here takes plain data and returns plain data,
and runs in the student process (the sandbox preloads this module).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import torch

from checks import registry
from checks.harness import (DELEGATION_REFUSALS, Json, Submission, guarded, run_scaler_ops, seed_cpu, tensor_values,
                            torch_scaler)
from checks.optimizers import PlainSGD, RecordingSGD


class _BackwardProbe(torch.autograd.Function):
    """Identity whose backward records the autocast state and the incoming gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, probe: "AmpProbe") -> torch.Tensor:  # type: ignore[override]
        ctx.probe = probe
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:  # type: ignore[override]
        probe: AmpProbe = ctx.probe
        true_grad = probe._true_output_grad
        ratio = float((grad.double() * true_grad).sum() / true_grad.pow(2).sum()) if true_grad is not None else 0.0
        # The probe sits at the output, so this runs before any parameter gradient of this backward.
        clear = all(p.grad is None or not bool(p.grad.any()) for p in probe.parameters())
        probe._log.append({"event": "backward", "autocast": probe.autocast_on(), "grad_ratio": ratio,
                          "grads_clear": clear})
        if probe._inject_inf:
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
        return grad, None


class AmpProbe(torch.nn.Module):
    """A small MLP whose forward, loss and backward report what they see to ``log``.

    What it records lives in private attributes, which the static rules keep code under test
    from touching (``model._log`` is refused; ``self._log`` in the probe's own methods is not).
    """

    def __init__(self, sizes: list[int], device_type: str, log: list[dict[str, Json]]) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.device_type = device_type
        self._log = log
        self._inject_inf = False
        self._true_output_grad: torch.Tensor | None = None

    def autocast_on(self) -> bool:
        return bool(torch.is_autocast_enabled(self.device_type))

    def autocast_dtype(self) -> str | None:
        return str(torch.get_autocast_dtype(self.device_type)).replace("torch.", "") if self.autocast_on() else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._log.append({"event": "forward", "autocast": self.autocast_on(), "dtype": self.autocast_dtype()})
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index + 1 < len(self.layers):
                x = torch.relu(x)
        return _BackwardProbe.apply(x, self)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean squared error that also records the true gradient w.r.t. ``outputs``."""
        value = torch.nn.functional.mse_loss(outputs, targets)
        diff = outputs.detach().double() - targets.double()
        self._true_output_grad = 2.0 * diff / diff.numel()
        self._log.append(
            {"event": "loss", "autocast": self.autocast_on(), "dtype": self.autocast_dtype(), "value": float(value.detach())}
        )
        return value


class ScalerProbe:
    """Wraps a scaler, logging each call and flagging optimizer steps made through it.

    An error raised by the wrapped scaler's ``unscale_``/``step``/``update`` (torch's scaler
    raises on calls out of order) is logged as a ``scaler error`` event instead of ending the
    ``amp_step`` call: the check of the order that was wrong reports it, the checks of other
    behaviours still see the rest of the call.
    """

    def __init__(self, inner: Any, log: list[dict[str, Json]]) -> None:
        self._inner = inner
        self._log = log

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._inner, name)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported through the log
            self._log.append({"event": "scaler error", "call": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            return None

    def scale(self, outputs: Any) -> Any:
        self._log.append({"event": "scale", "scale": float(self._inner.get_scale())})
        return self._inner.scale(outputs)

    def unscale_(self, optimizer: Any) -> None:
        self._log.append({"event": "unscale_"})
        self._call("unscale_", optimizer)

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append({"event": "scaler.step"})
        flag = getattr(optimizer, "_inside_scaler_step", None)
        if flag is not None:
            optimizer._inside_scaler_step = True
        try:
            return self._call("step", optimizer, *args, **kwargs)
        finally:
            if flag is not None:
                optimizer._inside_scaler_step = False

    def update(self, new_scale: Any = None) -> None:
        self._log.append({"event": "update"})
        self._call("update", new_scale)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class ContractScaler:
    """torch's GradScaler behind only the contract's methods: a scaler that is not a ``GradScaler``.

    Task 2 checks that ``amp_step`` works with any scaler of the contract with this one rather
    than the submission's ToyLossScaler, so that a Task 1 bug does not cost Task 2 points.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._inner = torch_scaler(**kwargs)

    def scale(self, outputs: Any) -> Any:
        return self._inner.scale(outputs)

    def unscale_(self, optimizer: Any) -> None:
        self._inner.unscale_(optimizer)

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        return self._inner.step(optimizer, *args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        self._inner.update(new_scale)

    def get_scale(self) -> float:
        return float(self._inner.get_scale())

    def get_growth_tracker(self) -> int:
        return int(self._inner._get_growth_tracker())

    def state_dict(self) -> dict[str, Any]:
        return self._inner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._inner.load_state_dict(state)


class _LoggingSGD(RecordingSGD):
    def zero_grad(self, set_to_none: bool = True) -> None:
        if self._log is not None:
            self._log.append({"event": "zero_grad"})
        super().zero_grad(set_to_none=set_to_none)


def run_amp_probe(args: dict[str, Json], amp_step: Callable[..., Any], make_scaler: Callable[..., Any],
                  root: Path | None = None) -> dict[str, Json]:
    """Call ``amp_step`` for ``args["steps"]`` iterations on a probed model and report the log.

    Args (keys of ``args``): ``sizes`` (layer widths), ``batch``, ``steps``, ``lr``,
    ``device_type``, ``dtype``, ``max_grad_norm``, ``inject_inf_at`` (iterations whose
    gradients get an inf), ``scaler_kwargs``, ``seed``, ``same_batch``.
    """
    seed_cpu(int(args.get("seed", 0)))
    log: list[dict[str, Json]] = []
    sizes = list(args.get("sizes", [8, 16, 4]))
    model = AmpProbe(sizes, args.get("device_type", "cpu"), log)
    optimizer = _LoggingSGD(model.parameters(), lr=float(args.get("lr", 0.01)))
    optimizer._log = log
    made = guarded(lambda: make_scaler(**args.get("scaler_kwargs", {})), root)
    if "error" in made:
        return {"log": log, "steps": [{**made, "params_changed": False, "scale_after": None}]}
    scaler = ScalerProbe(made["ok"], log)
    batch = int(args.get("batch", 16))
    inputs, targets = torch.randn(batch, sizes[0]), torch.randn(batch, sizes[-1])
    steps: list[dict[str, Json]] = []
    for index in range(int(args.get("steps", 1))):
        if not args.get("same_batch", True):
            inputs, targets = torch.randn(batch, sizes[0]), torch.randn(batch, sizes[-1])
        model._inject_inf = index in args.get("inject_inf_at", [])
        log.append({"event": "call", "step": index})
        before = [tensor_values(p) for p in model.parameters()]

        def call() -> Json:
            keywords = {"device_type": args.get("device_type", "cpu"), "dtype": getattr(torch, args.get("dtype", "float16")),
                        "max_grad_norm": args.get("max_grad_norm")}
            positional = (model, inputs, targets, model.loss, optimizer, scaler)
            if args.get("by_keyword"):  # the contract's parameter names
                names = ("model", "inputs", "targets", "loss_fn", "optimizer", "scaler")
                returned = amp_step(**dict(zip(names, positional)), **keywords)
            else:
                returned = amp_step(*positional, **keywords)
            if not isinstance(returned, torch.Tensor):
                return {"type": type(returned).__name__}
            return {"type": "Tensor", "requires_grad": returned.requires_grad, "numel": returned.numel(),
                    "value": float(returned.detach().double().reshape(-1)[0]) if returned.numel() else None}

        outcome = guarded(call, root)
        after = [tensor_values(p) for p in model.parameters()]
        steps.append({**outcome, "params_changed": before != after, "scale_after": float(scaler.get_scale())})
        if "error" in outcome:
            break
    return {"log": log, "steps": steps}


# --------------------------------------------------------------------------- underflow training


def _mse(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        weight = model.weight.to(torch.float32)
        return float(torch.nn.functional.mse_loss(x @ weight.t(), y))


def run_underflow(args: dict[str, Json], amp_step: Callable[..., Any] | None, make_scaler: Callable[..., Any] | None,
                  root: Path | None = None) -> dict[str, Json]:
    """Train the demo's tiny-target linear regression in fp16 autocast; report the losses.

    With ``amp_step``/``make_scaler`` None the run is the unscaled baseline.  ``args["device"]``
    (default "cpu") places data and model; the data are drawn on the CPU whatever the device.
    """
    seed_cpu(int(args.get("seed", 0)))
    n, d = int(args.get("n", 4096)), int(args.get("d", 16))
    x = torch.randn(n, d)
    y = x @ torch.randn(d, 1) * float(args.get("target_scale", 1e-4))
    device = args.get("device", "cpu")
    x, y = x.to(device), y.to(device)
    model = torch.nn.Linear(d, 1, bias=False).to(device)
    torch.nn.init.zeros_(model.weight)
    optimizer = PlainSGD(model.parameters(), lr=float(args.get("lr", 0.25)))
    losses: list[float] = []
    made = guarded(lambda: make_scaler(**args.get("scaler_kwargs", {})), root) if make_scaler else {"ok": None}
    if "error" in made:
        return {**made, "losses": []}
    scaler = made["ok"]
    device_type = args.get("device_type", "cpu")

    def train() -> Json:
        for _ in range(int(args.get("steps", 200))):
            if amp_step is None:
                optimizer.zero_grad()
                with torch.autocast(device_type=device_type, dtype=torch.float16):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
            else:
                loss = amp_step(model, x, y, torch.nn.functional.mse_loss, optimizer, scaler,
                                device_type=device_type, dtype=torch.float16)
            losses.append(float(loss))
        return None

    outcome = guarded(train, root)
    final_loss = guarded(lambda: _mse(model, x, y), root)  # measured here, not from amp_step's return value
    final = final_loss.get("ok", math.nan)
    return {**outcome, "losses": losses, "final_loss": final}


# --------------------------------------------------------------------------- delegation


DELEGATION_OPS = {
    "world": {"optimizers": [{"groups": [[2]], "lr": 0.1}], "seed": 0},
    "ops": [{"op": "new", "kwargs": {"init_scale": 4.0, "growth_interval": 1}},
            {"op": "scale", "values": [1.0], "dtype": "float16"},
            {"op": "grads", "opt": 0, "values": [[1.0, float("inf")]]}, {"op": "step", "opt": 0}, {"op": "update"},
            {"op": "grads", "opt": 0, "values": [[1.0, 2.0]]}, {"op": "unscale_", "opt": 0},
            {"op": "step", "opt": 0}, {"op": "update"}],
}


def run_delegation_probe(make_scaler: Callable[..., Any], root: Path | None = None) -> dict[str, Json]:
    """Drive a short scaler run and report how often code in this process called torch's GradScaler or
    its private kernels (instantiating or subclassing the class counts) since the submission was loaded.

    Wherever loss_scaler.py runs, these are stand-ins that raise and count (:mod:`checks.guards`);
    the counts since loading include what the file did while it was imported.  A broken scaler
    simply adds nothing.
    """
    run_scaler_ops(DELEGATION_OPS, make_scaler, root)
    return {"counts": dict(DELEGATION_REFUSALS)}


# --------------------------------------------------------------------------- registration


def _amp_step_and_scaler(args: dict[str, Json], submission: Submission) -> tuple[Callable[..., Any], Callable[..., Any]]:
    amp_step = submission.attribute("amp_step")
    chosen = args.get("scaler")
    make_scaler = {"torch": torch_scaler, "contract": ContractScaler}.get(chosen) or submission.attribute("loss_scaler")
    return amp_step, make_scaler


registry.register("amp_probe", lambda args, sub: run_amp_probe(args, *_amp_step_and_scaler(args, sub), sub.root))
registry.register("underflow", lambda args, sub: run_underflow(args, *_amp_step_and_scaler(args, sub), sub.root))
registry.register("delegation", lambda args, sub: run_delegation_probe(sub.attribute("loss_scaler"), sub.root))
