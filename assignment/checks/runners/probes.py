"""Probes for ``amp_step``: a model, loss, optimizer and scaler wrapper that report what they see.

Plus the underflow training run.  Like
:mod:`checks.runners.harness`, everything here takes plain data and returns plain data,
and runs in the student process (the sandbox preloads this module).

One module past 400 lines: the sandbox preloads it whole into each student process that runs ``amp_step``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import torch

from checks.runners import registry
from checks.runners.harness import (Json, Submission, copy_out_params, copy_out_tensor, gradscaler_state,
                            guarded, is_plain_tensor, param_grad, run_scaler_ops, seed_cpu, tensor_facts, tensor_values, torch_scaler)
from checks.runners.optimizers import RecordingSGD


#: The log of the probe call under way (empty when none): torch's gradient clipping reports to it, so that the
#: call trace shows where clipping ran (it explains a failure; it earns nothing).
_CALL_LOG: list[list[dict[str, Json]]] = []


def _reporting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def clip(*args: Any, **kwargs: Any) -> Any:
        if _CALL_LOG:
            _CALL_LOG[-1].append({"event": name})
        return original(*args, **kwargs)

    clip._probe_original = original  # type: ignore[attr-defined]
    return clip


# Installed when this module is imported, before any submission is: ``from torch.nn.utils import
# clip_grad_norm_`` in a submission gets the reporting function too.  Outside a probe call it only calls torch's.
for _name in ("clip_grad_norm_", "clip_grad_value_"):
    _original = getattr(torch.nn.utils.clip_grad, _name)
    if not hasattr(_original, "_probe_original"):
        for _module in (torch.nn.utils, torch.nn.utils.clip_grad):
            setattr(_module, _name, _reporting(_name, getattr(_original, "_probe_original", _original)))


class _BackwardProbe(torch.autograd.Function):
    """A fixed float32 linear map on the model's output whose backward records what it sees.

    Its forward multiplies by a fixed matrix with autocast off; its backward multiplies the
    incoming gradient by the transpose, a float32 matmul that autocast recasts to the autocast
    dtype when backward runs inside ``torch.autocast``.  So a backward pass inside autocast
    changes the gradients, an effect the judge sees (torch's own backward ops keep the
    forward's dtypes whatever autocast says, so without this it would change nothing).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, probe: "AmpProbe") -> torch.Tensor:  # type: ignore[override]
        ctx.probe = probe
        with torch.autocast(probe.device_type, enabled=False):
            return torch.matmul(x, probe._turn.to(x.device))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:  # type: ignore[override]
        probe: AmpProbe = ctx.probe
        true_grad = probe._true_output_grad
        ratio = float((grad.double() * true_grad).sum() / true_grad.pow(2).sum()) if true_grad is not None else 0.0
        # The probe sits at the output, so this runs before any parameter gradient of this backward.
        clear = all(p.grad is None or not bool(p.grad.any()) for p in probe.parameters())
        probe._log.append({"event": "backward", "autocast": probe.autocast_on(), "dtype": probe.autocast_dtype(),
                           "grad_ratio": ratio, "grads_clear": clear})
        grad = torch.matmul(grad, probe._turn.to(grad.device).t()).to(grad.dtype)
        if probe._inject_inf:
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
        return grad, None


class AmpProbe(torch.nn.Module):
    """A small MLP whose forward, loss and backward report what they see to ``log``.

    The model's output is float32 (cast after the last layer) and its loss mixes the outputs
    with a fixed float32 matrix before the squared error: under autocast that matmul runs in
    the autocast dtype, so computing the loss outside autocast changes the loss and the
    gradients, as running the forward outside autocast does.  What the probe records (the
    log) only explains a failure; the rows are judged on effects (parameters, gradients,
    scaler state, returned loss), see :mod:`checks.judge.effects`.

    What it records lives in private attributes; code under test may read or rewrite them (nothing
    stops it), which earns nothing: the log only suggests what the judge replays.
    """

    def __init__(self, sizes: list[int], device_type: str, log: list[dict[str, Json]]) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.device_type = device_type
        self._log = log
        self._inject_inf = False
        self._true_output_grad: torch.Tensor | None = None
        generator = torch.Generator().manual_seed(1)
        self._mix = torch.eye(sizes[-1]) + 0.25 * torch.randn(sizes[-1], sizes[-1], generator=generator)
        self._turn = torch.eye(sizes[-1]) + 0.25 * torch.randn(sizes[-1], sizes[-1], generator=generator)

    def autocast_on(self) -> bool:
        return bool(torch.is_autocast_enabled(self.device_type))

    def autocast_dtype(self) -> str | None:
        return str(torch.get_autocast_dtype(self.device_type)).replace("torch.", "") if self.autocast_on() else None

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._log.append({"event": "zero_grad"})
        super().zero_grad(set_to_none=set_to_none)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        param_dtype = str(self.layers[0].weight.dtype).replace("torch.", "")
        self._log.append({"event": "forward", "autocast": self.autocast_on(), "dtype": self.autocast_dtype(),
                          "param_dtype": param_dtype})
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index + 1 < len(self.layers):
                x = torch.relu(x)
        return _BackwardProbe.apply(x.float(), self)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Squared error of the mixed outputs; also records the true gradient w.r.t. ``outputs``."""
        mixed = torch.matmul(outputs, self._mix.to(outputs.device))
        value = torch.nn.functional.mse_loss(mixed, targets)
        diff = mixed.detach().double() - targets.double()
        self._true_output_grad = (2.0 * diff / diff.numel()) @ self._mix.double().t()
        self._log.append(
            {"event": "loss", "autocast": self.autocast_on(), "dtype": self.autocast_dtype(), "value": float(value.detach())}
        )
        return value


class ScalerProbe:
    """Wraps the harness's scaler, logging each call and flagging optimizer steps made through it.

    A call the wrapped scaler refuses (torch's scaler raises on calls out of order: a second
    ``unscale_`` or ``step`` since the last ``update``, ``unscale_`` after ``step``, ``update``
    with no inf check recorded, ...) ends the ``amp_step`` call with torch's own error, as in a
    real training loop: it is logged as a ``scaler error`` event naming the call, and raised
    again unchanged.  The scenario then goes on with its next call, so the behaviours that call
    shows are still judged; the judge's replay of the same choices raises the same error at the
    same place (an effect it compares), and the row whose behaviour the refused call breaks is
    the one a replay with that behaviour set right does not reproduce.  The probe keeps no record
    that steers an effect: what a refused call does is torch's, whatever the log says.
    """

    def __init__(self, inner: Any, log: list[dict[str, Json]]) -> None:
        self._inner = inner
        self._log = log

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._inner, name)(*args, **kwargs)
        except Exception as exc:
            self._log.append({"event": "scaler error", "call": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            raise

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


def _torch_inner(scaler: Any) -> torch.amp.GradScaler | None:
    """torch's scaler inside ``scaler`` when it is the harness's own (torch's, or the contract's stand-in)."""
    if type(scaler) is torch.amp.GradScaler:
        return scaler
    return scaler._inner if type(scaler) is ContractScaler else None


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


def describe_returned(value: Any) -> dict[str, Json]:
    """What ``amp_step`` returned, as plain data: a plain tensor's facts and first value, else its kind."""
    if is_plain_tensor(value):
        facts = tensor_facts(value)
        return {"type": "Tensor", **facts, "value": tensor_values(value)[0] if facts["numel"] else None}
    if isinstance(value, torch.Tensor):
        return {"type": f"Tensor subclass {type(value).__name__[:80]}"}
    if type(value) in (float, int):
        return {"type": type(value).__name__, "value": float(value)}
    return {"type": type(value).__name__[:80]}


def scaler_state(scaler: Any, optimizer: torch.optim.Optimizer) -> Json:
    """The state of the harness's own torch-backed scaler after a call (None for a submission's scaler).

    Besides scale and growth tracker, the stage torch's scaler keeps for ``optimizer`` (0 ready,
    1 unscaled, 2 stepped; ``update()`` resets it): it shows a ``scaler.step`` that the scaler
    refused (no gradients to unscale) where the parameters cannot.
    """
    inner = _torch_inner(scaler)
    if inner is None:
        return None
    entry = dict.get(inner._per_optimizer_states, id(optimizer))
    stage = entry.get("stage") if isinstance(entry, dict) else None
    return {**gradscaler_state(inner), "stage": int(stage.value) if stage is not None else 0}


def watch_backward(params: list[torch.nn.Parameter]) -> dict[int, Json]:
    """Copy out each parameter's gradient whenever a backward pass has accumulated into it.

    The returned dict maps a parameter's index to its gradient at the end of the latest
    backward (the caller empties it before each call): an effect of the backward pass that
    clearing the gradients afterwards cannot hide.
    """
    seen: dict[int, Json] = {}

    def hook_for(index: int) -> Callable[[torch.nn.Parameter], None]:
        def hook(param: torch.nn.Parameter) -> None:
            grad = param_grad(param)
            seen[index] = None if grad is None else copy_out_tensor(grad)
        return hook

    for index, param in enumerate(params):
        param.register_post_accumulate_grad_hook(hook_for(index))
    return seen


def run_amp_probe(args: dict[str, Json], amp_step: Callable[..., Any], make_scaler: Callable[..., Any],
                  root: Path | None = None) -> dict[str, Json]:
    """Call ``amp_step`` for ``args["steps"]`` iterations on a probed model; report effects and the log.

    Args (keys of ``args``): ``sizes`` (layer widths), ``batch``, ``steps``, ``lr``,
    ``device_type``, ``dtype``, ``max_grad_norm``, ``inject_inf_at`` (iterations whose
    gradients get an inf), ``scaler_kwargs``, ``seed``, ``same_batch``, ``by_keyword``.

    Returns ``{"log": [...], "steps": [...]}``: the log records what was called (it explains a
    failure, it earns nothing); each step holds ``ok`` (what ``amp_step`` returned, see
    :func:`describe_returned`) or ``error``, and the effects copied out by the harness after
    the call: ``params`` and ``grads`` (the model's parameters and their gradients, see
    :func:`checks.runners.harness.copy_out_params`), ``backward_grads`` (the gradients as the call's
    last backward pass left them, see :func:`watch_backward`) and ``scaler`` (see
    :func:`scaler_state`).  A call that raised (a call torch's scaler refused, say) is followed by
    the next, as a loop that reports a failed iteration and goes on: the later calls still show
    the behaviours the error did not reach.
    """
    seed_cpu(int(args.get("seed", 0)))
    log: list[dict[str, Json]] = []
    sizes = list(args.get("sizes", [8, 16, 4]))
    model = AmpProbe(sizes, args.get("device_type", "cpu"), log)
    params = list(model.parameters())
    backward_grads = watch_backward(params)
    optimizer = _LoggingSGD(model.parameters(), lr=float(args.get("lr", 0.01)))
    optimizer._log = log
    made = guarded(lambda: make_scaler(**args.get("scaler_kwargs", {})), root)
    if "error" in made:
        return {"log": log, "steps": [{**made, **copy_out_params(params), "backward_grads": [None] * len(params),
                                       "scaler": None}]}
    scaler = ScalerProbe(made["ok"], log)
    _CALL_LOG.append(log)
    try:
        steps = _probe_calls(args, amp_step, model, params, optimizer, scaler, made["ok"], backward_grads, root)
    finally:
        _CALL_LOG.pop()
    return {"log": log, "steps": steps}


def _probe_calls(args: dict[str, Json], amp_step: Callable[..., Any], model: AmpProbe, params: list[Any],
                 optimizer: torch.optim.Optimizer, scaler: ScalerProbe, made: Any, backward_grads: dict[int, Json],
                 root: Path | None) -> list[dict[str, Json]]:
    """The calls of :func:`run_amp_probe`, each followed by the effects it left."""
    log = model._log
    sizes = [model.layers[0].in_features, model.layers[-1].out_features]
    batch = int(args.get("batch", 16))
    inputs, targets = torch.randn(batch, sizes[0]), torch.randn(batch, sizes[-1])
    steps: list[dict[str, Json]] = []
    for index in range(int(args.get("steps", 1))):
        if not args.get("same_batch", True):
            inputs, targets = torch.randn(batch, sizes[0]), torch.randn(batch, sizes[-1])
        model._inject_inf = index in args.get("inject_inf_at", [])
        log.append({"event": "call", "step": index})
        backward_grads.clear()

        def call() -> Json:
            keywords = {"device_type": args.get("device_type", "cpu"), "dtype": getattr(torch, args.get("dtype", "float16")),
                        "max_grad_norm": args.get("max_grad_norm")}
            positional = (model, inputs, targets, model.loss, optimizer, scaler)
            if args.get("by_keyword"):  # the contract's parameter names
                names = ("model", "inputs", "targets", "loss_fn", "optimizer", "scaler")
                return describe_returned(amp_step(**dict(zip(names, positional)), **keywords))
            return describe_returned(amp_step(*positional, **keywords))

        outcome = guarded(call, root)
        steps.append({**outcome, **copy_out_params(params),
                      "backward_grads": [backward_grads.get(i) for i in range(len(params))],
                      "scaler": scaler_state(made, optimizer)})
    return steps


# --------------------------------------------------------------------------- underflow training


def underflow_data(args: dict[str, Json]) -> tuple[torch.Tensor, torch.Tensor]:
    """The demo's inputs and tiny targets (drawn on the CPU from ``args["seed"]``)."""
    seed_cpu(int(args.get("seed", 0)))
    n, d = int(args.get("n", 4096)), int(args.get("d", 16))
    x = torch.randn(n, d)
    y = x @ torch.randn(d, 1) * float(args.get("target_scale", 1e-4))
    return x, y


def underflow_loss(args: dict[str, Json], weight: list[float]) -> float:
    """The demo's float32 mean squared error for the weight values ``weight`` (the judge's own measure)."""
    x, y = underflow_data(args)
    w = torch.tensor(weight, dtype=torch.float32).reshape(1, -1)
    return float(torch.nn.functional.mse_loss(x @ w.t(), y))


class _LoggedLinear(torch.nn.Linear):
    """The demo's linear model, reporting its forward, backward and zero_grad to ``_log`` as :class:`AmpProbe` does."""

    def __init__(self, d: int, device_type: str, log: list[dict[str, Json]]) -> None:
        super().__init__(d, 1, bias=False)
        self._log, self.device_type = log, device_type
        self.weight.register_hook(self._backward_seen)

    def _backward_seen(self, grad: torch.Tensor) -> None:
        clear = self.weight.grad is None or not bool(self.weight.grad.any())
        self._log.append({"event": "backward", "grads_clear": clear})

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._log.append({"event": "zero_grad"})
        super().zero_grad(set_to_none=set_to_none)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on = bool(torch.is_autocast_enabled(self.device_type))
        dtype = str(torch.get_autocast_dtype(self.device_type)).replace("torch.", "") if on else None
        self._log.append({"event": "forward", "autocast": on, "dtype": dtype,
                          "param_dtype": str(self.weight.dtype).replace("torch.", "")})
        return super().forward(x)


def underflow_scaler_state(scaler: Any, optimizer: torch.optim.Optimizer) -> Json:
    """:func:`scaler_state` plus the inf found for ``optimizer`` since the last update (None when none was
    recorded): with it the judge rebuilds torch's scaler as a call left it and replays the next call."""
    state = scaler_state(scaler, optimizer)
    inner = _torch_inner(scaler)
    if state is None or inner is None:
        return state
    entry = dict.get(inner._per_optimizer_states, id(optimizer))
    found = list(entry.get("found_inf_per_device", {}).values()) if isinstance(entry, dict) else []
    return {**state, "found_inf": sum(tensor_values(f)[0] for f in found) if found else None}


def run_underflow(args: dict[str, Json], amp_step: Callable[..., Any] | None, make_scaler: Callable[..., Any] | None,
                  root: Path | None = None) -> dict[str, Json]:
    """Train the demo's tiny-target linear regression in fp16 autocast; report the losses, every call's effects
    and the final weight.

    With ``amp_step``/``make_scaler`` None the run is the unscaled baseline.  ``args["device"]``
    (default "cpu") places data and model; the data are drawn on the CPU whatever the device.
    ``losses`` are the values ``amp_step`` returned (they explain, they are not graded);
    ``final_weight`` is the model's weight after training, copied out as plain data (or a note
    when it is no plain parameter any more): the judge measures the final loss from it
    (:func:`underflow_loss`).  ``calls`` holds, after every call, the weight, its gradient, the
    scaler's state (:func:`underflow_scaler_state`) and the call's error if it raised: the judge
    replays calls from these states, so a weight reached by anything but AMP steps earns nothing
    (the grader's :mod:`autograder.engine.underflow_steps`).  The harness's own scaler is handed over
    behind a :class:`ScalerProbe`, as in :func:`run_amp_probe`: a call torch's scaler refuses ends that
    ``amp_step`` call with torch's error, and training goes on with the next.
    """
    x, y = underflow_data(args)
    d = x.shape[1]
    device = args.get("device", "cpu")
    x, y = x.to(device), y.to(device)
    device_type = args.get("device_type", "cpu")
    log: list[dict[str, Json]] = []
    model = _LoggedLinear(d, device_type, log).to(device)
    torch.nn.init.zeros_(model.weight)
    weight = model.weight
    optimizer = _LoggingSGD(model.parameters(), lr=float(args.get("lr", 0.25)))
    optimizer._log = log
    losses: list[float] = []
    calls: list[dict[str, Json]] = []
    made = guarded(lambda: make_scaler(**args.get("scaler_kwargs", {})), root) if make_scaler else {"ok": None}
    if "error" in made:
        return {**made, "losses": [], "final_weight": copy_out_tensor(weight), "log": log, "calls": []}
    scaler = made["ok"]
    probe = ScalerProbe(scaler, log) if _torch_inner(scaler) is not None else None

    def loss_fn(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        on = bool(torch.is_autocast_enabled(device_type))
        log.append({"event": "loss", "autocast": on,
                    "dtype": str(torch.get_autocast_dtype(device_type)).replace("torch.", "") if on else None})
        return torch.nn.functional.mse_loss(outputs, targets)

    def baseline() -> Json:
        optimizer.zero_grad()
        with torch.autocast(device_type=device_type, dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return float(loss)

    for index in range(int(args.get("steps", 200))):
        log.append({"event": "call", "step": index})
        if amp_step is None:
            outcome = guarded(baseline, root)
        else:
            outcome = guarded(lambda: amp_step(model, x, y, loss_fn, optimizer, probe or scaler,
                                               device_type=device_type, dtype=torch.float16), root)
        loss = guarded(lambda: float(outcome["ok"]), root) if "ok" in outcome else {}
        if "ok" in loss:  # what was returned explains, it is never graded here (row 2.8 grades it)
            losses.append(loss["ok"])
        if amp_step is not None:
            grad = param_grad(weight)
            calls.append({**({"error": outcome["error"]} if "error" in outcome else {}),
                          "weight": copy_out_tensor(weight), "grad": None if grad is None else copy_out_tensor(grad),
                          "scaler": underflow_scaler_state(scaler, optimizer)})
    return {"ok": None, "losses": losses, "final_weight": copy_out_tensor(weight), "log": log, "calls": calls}


# --------------------------------------------------------------------------- registration


def _amp_step_and_scaler(args: dict[str, Json], submission: Submission) -> tuple[Callable[..., Any], Callable[..., Any]]:
    amp_step = submission.attribute("amp_step")
    chosen = args.get("scaler")
    make_scaler = {"torch": torch_scaler, "contract": ContractScaler}.get(chosen) or submission.attribute("loss_scaler")
    return amp_step, make_scaler


registry.register("amp_probe", lambda args, sub: run_amp_probe(args, *_amp_step_and_scaler(args, sub), sub.root))
registry.register("underflow", lambda args, sub: run_underflow(args, *_amp_step_and_scaler(args, sub), sub.root))
