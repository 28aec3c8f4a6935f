"""Scenario runners: plain data in, plain data out.

Every check of a submission is a *scenario*: a JSON-able description of what to
build and which calls to make (``args``), and a JSON-able record of what happened
(the observation).  The same runner code executes in three places:

* inside the autograder's sandboxed student process, against the submission;
* in-process when a student runs the public checks locally;
* in the trusted judge, against ``torch.amp.GradScaler`` as the reference.

Because only plain data crosses the boundary, the judge never unpickles or calls
anything the student process produced, and whatever a submission monkeypatches in
its own process can only change its own observations, never the verdict.

This module imports nothing but torch and the standard library: it is preloaded
into the sandbox before any student code runs.
"""

from __future__ import annotations

import os
import sys
import types
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch._ops import _len_torch_dispatch_stack_pre_dispatch
from torch.utils._python_dispatch import _disable_current_modes, _len_torch_dispatch_stack

from checks.runners import quick_check, registry
from checks.runners.optimizers import RecordingSGD
from checks.words import english

Json = Any
CONTRACT_FILES = {"loss_scaler": "loss_scaler.py", "amp_step": "amp_step.py", "answers": "answers.py"}
CONTRACT_NAMES = {"loss_scaler": "ToyLossScaler", "amp_step": "amp_step"}


def seed_cpu(seed: int) -> None:
    """Seed torch's CPU generator.  ``torch.manual_seed`` would also format a stack trace for lazy
    accelerator seeding on every call, which costs seconds over a grading run."""
    torch.default_generator.manual_seed(seed)


class SubmissionFault(Exception):
    """The submission cannot be exercised at all (missing file, import error, crash, hang).

    ``str(fault)`` is a message written for the student.
    """


# --------------------------------------------------------------------------- loading


def submission_frames(exc: BaseException, root: Path | None = None) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback that lie in the submission's own files."""
    names = set(CONTRACT_FILES.values())

    def ours(filename: str) -> bool:
        return os.path.basename(filename) in names and (root is None or Path(filename).parent == root)

    # Filtered before the summary is built: only the kept frames' source lines are looked up.
    kept = [(frame, line) for frame, line in traceback.walk_tb(exc.__traceback__) if ours(frame.f_code.co_filename)]
    return list(traceback.StackSummary.extract(kept))


def student_frames(exc: BaseException, root: Path | None = None) -> str:
    """Format ``exc``'s traceback keeping only frames from the submission's own files."""
    kept = submission_frames(exc, root)
    lines = [f'  {Path(f.filename).name}, line {f.lineno}, in {f.name}\n    {f.line or ""}' for f in kept]
    head = f"{type(exc).__name__}: {exc}"
    return "\n".join(lines + [head]) if lines else head


class Submission:
    """Loads the contract's modules from one folder, lazily and by module name.

    Files are imported as plain Python: what keeps a grade honest is outside the student's
    process (the judge recomputes every effect, and :mod:`checks.student.absence` takes torch's scaler
    out of the processes that run ``loss_scaler.py``), so nothing here restricts the code.
    Modules get their own names (``loss_scaler``...), never ``__main__``, so a submission's
    ``if __name__ == "__main__":`` block does not run.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._modules: dict[str, Any] = {}

    def module(self, name: str) -> Any:
        if name in self._modules:
            return self._modules[name]
        path = self.root / CONTRACT_FILES[name]
        if not path.is_file():
            raise SubmissionFault(english("file.missing", file=path.name))
        try:
            source = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SubmissionFault(english("file.not_utf8", file=path.name, byte=exc.start)) from None
        try:
            code = compile(source, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None) or 0
            raise SubmissionFault(english("file.syntax", file=path.name, line=line, message=getattr(exc, "msg", exc))) from None
        if str(self.root) not in sys.path:
            sys.path.insert(0, str(self.root))  # amp_step.py may import loss_scaler as a sibling
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        self._modules[name] = module  # a sibling importing this one while it runs gets the same module
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends too
            self._forget(name)
            raise SubmissionFault(english("file.import_raised", file=path.name, frames=student_frames(exc, self.root))) from None
        return module

    def _forget(self, name: str) -> None:
        sys.modules.pop(name, None)
        self._modules.pop(name, None)

    def attribute(self, module_name: str) -> Any:
        module = self.module(module_name)
        name = CONTRACT_NAMES[module_name]
        if not hasattr(module, name):
            raise SubmissionFault(english("file.undefined", file=CONTRACT_FILES[module_name], name=name))
        return getattr(module, name)


# --------------------------------------------------------------------------- encoding


def describe_error(exc: BaseException, root: Path | None = None) -> dict[str, Json]:
    """Plain-data description of an exception raised by student code."""
    return {
        "type": type(exc).__name__,
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc)[:500],
        "trace": student_frames(exc, root)[-2000:],
    }


# --------------------------------------------------------------------------- plain-data copy-out
#
# What leaves the student process is copied out by the functions below, never by a method of the
# object itself: a tensor counts only if its type is exactly torch.Tensor (or, for the harness's own
# parameters, exactly torch.nn.Parameter), so a subclass with ``__torch_function__`` (or a class
# assigned through ``__class__``) cannot choose the values it reports.  The torch functions used
# are bound here, when the harness is imported and before any student code runs, and run with
# torch-function overrides and dispatch modes disabled.

_TOLIST = torch.Tensor.tolist
_RESHAPE = torch.Tensor.reshape
_DETACH = torch.Tensor.detach
_TO = torch.Tensor.to
_NUMEL = torch.Tensor.numel
_DIM = torch.Tensor.dim
_LAYOUT = torch._C.TensorBase.layout.__get__
_REQUIRES_GRAD = torch._C.TensorBase.requires_grad.__get__
_GRAD = torch._C.TensorBase.grad.__get__
_DTYPE = torch._C.TensorBase.dtype.__get__
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction
_STRIDED = torch.strided
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class NotPlainData(Exception):
    """A value the harness copies out is not of the exact type it must have (a tensor subclass, say)."""


def read_plainly(read: Callable[..., Any], *args: Any) -> Any:
    """``read(*args)`` with no override in effect: ``__torch_function__`` disabled and, if any dispatch
    mode is active, every mode popped (torch's own ``_disable_current_modes``) until it returns.

    Checking the two mode stacks first is what makes it cheap: a scenario reads tensors thousands of
    times, and nearly always no mode is active.  (A plain function with ``with`` blocks, not a context
    manager class: the copy-out runs around every operation, and a Python-level ``__enter__`` and
    ``__exit__`` cost more than the reads.)
    """
    with _NO_TORCH_FUNCTION():
        if _len_torch_dispatch_stack() or _len_torch_dispatch_stack_pre_dispatch():  # modes __torch_dispatch__ uses
            with _disable_current_modes():
                return read(*args)
        return read(*args)


def is_plain_tensor(value: Any) -> bool:
    """Whether ``value``'s type is exactly ``torch.Tensor`` or ``torch.nn.Parameter`` (no subclass)."""
    return type(value) in PLAIN_TENSOR_TYPES


def tensor_values(tensor: torch.Tensor) -> list[float]:
    """The values of ``tensor``, flattened, as Python floats; raises NotPlainData for any other type."""
    return tensors_values([tensor])[0]


def tensors_values(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """:func:`tensor_values` of each tensor, read under one guard against overrides (a scenario reads thousands)."""
    for tensor in tensors:
        if type(tensor) not in PLAIN_TENSOR_TYPES:  # is_plain_tensor, inlined: this loop runs around every op
            raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    return read_plainly(_all_floats, tensors)


def _all_floats(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    return [_floats(_DETACH(tensor)) for tensor in tensors]


def _floats(tensor: torch.Tensor) -> list[float]:
    """A plain tensor's values, flattened, as Python floats (any floating dtype converts to them exactly).

    A dense one-dimensional tensor is read as it is: ``reshape(-1)`` would only make an alias with the
    same sizes and strides (and cost more than the read); anything else (a scalar, a matrix, a sparse
    layout) is flattened first, so each fails or reads exactly as through ``reshape``.
    """
    flat = tensor if _DIM(tensor) == 1 and _LAYOUT(tensor) is _STRIDED else _RESHAPE(tensor, (-1,))
    return _TOLIST(flat if _DTYPE(flat).is_floating_point else _TO(flat, torch.float64))


def tensor_facts(tensor: torch.Tensor) -> dict[str, Json]:
    """dtype, requires_grad and numel of a plain tensor (see :func:`tensor_values`)."""
    if not is_plain_tensor(tensor):
        raise NotPlainData(f"a {type(tensor).__name__[:80]} where the harness expects a plain torch.Tensor")
    return read_plainly(lambda: {"dtype": str(_DTYPE(tensor)).replace("torch.", ""),
                                 "requires_grad": bool(_REQUIRES_GRAD(tensor)), "numel": int(_NUMEL(tensor))})


def param_grad(param: torch.nn.Parameter) -> torch.Tensor | None:
    """``param.grad`` read through torch's own descriptor (no override of ``grad`` applies)."""
    return _GRAD(param)


def copy_out_tensor(value: Any) -> "list[float] | str":
    """A tensor's values, or a note (a string) saying why they are not copied out."""
    if not is_plain_tensor(value):
        return f"not a plain tensor: a {type(value).__name__[:80]}"
    return tensor_values(value)


def copy_out_params(params: list[torch.nn.Parameter]) -> dict[str, Json]:
    """The values and gradients of the harness's own parameters, as plain data.

    ``params`` are the objects the harness made: if code under test changed one's class, or
    left a gradient that is not a plain tensor, the entry is a note instead of values.
    """
    values: list[Json] = []
    grads: list[Json] = []
    for param in params:
        values.append(copy_out_tensor(param))
        grad = param_grad(param) if is_plain_tensor(param) else None
        grads.append(None if grad is None else copy_out_tensor(grad))
    return {"params": values, "grads": grads}


def gradscaler_state(scaler: torch.amp.GradScaler) -> dict[str, Json]:
    """The scale and growth tracker of one of the harness's torch GradScalers, as plain data."""
    scale, tracker = scaler._scale, scaler._growth_tracker
    if scale is None or tracker is None:  # torch creates them lazily
        return {"scale": float(scaler._init_scale), "tracker": 0}
    return {"scale": tensor_values(scale)[0], "tracker": int(tensor_values(tracker)[0])}


class GraderSideError(Exception):
    """A device failure (CUDA could not start, out of memory, "CUDA error") raised outside the
    submission's own code: the grader's machine failed, not the student (see :func:`guarded`)."""


#: Words of the errors a broken or exhausted GPU raises (torch's CUDA, cuBLAS, cuDNN and driver messages).
DEVICE_FAILURE_WORDS = ("cuda", "cublas", "cudnn", "cusolver", "nvidia", "nvml", "out of memory")


def is_device_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is what a failing GPU raises (never true for a CPU-only error)."""
    types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch, "AcceleratorError", None))
                  if isinstance(t, type))
    text = f"{type(exc).__name__}: {exc}".lower()
    return isinstance(exc, types) or any(word in text for word in DEVICE_FAILURE_WORDS)


def guarded(call: Callable[[], Json], root: Path | None) -> dict[str, Json]:
    """Run one student call; return ``{"ok": result}`` or ``{"error": ...}``.

    A device failure raised outside the submission's own frames (the harness building a
    model on the GPU, say) is no answer of the student's: it is raised as GraderSideError.
    """
    try:
        return {"ok": call()}
    except SubmissionFault:
        raise
    except Exception as exc:  # noqa: BLE001 - any student exception is data
        if is_device_failure(exc) and not submission_frames(exc, root):
            raise GraderSideError(f"{type(exc).__name__}: {exc}") from exc
        return {"error": describe_error(exc, root)}


# --------------------------------------------------------------------------- scaler ops


def build_optimizers(world: dict[str, Json]) -> list[RecordingSGD]:
    """Optimizers over float32 params: ``world["optimizers"][i]["groups"]`` lists param sizes per group.

    ``world["device"]`` (default "cpu") places the params; their values never depend on it.
    """
    generator = torch.Generator().manual_seed(int(world.get("seed", 0)))
    device = world.get("device", "cpu")
    optimizers = []
    for spec in world["optimizers"]:
        dtype = getattr(torch, spec.get("dtype", "float32"))
        groups = [
            {"params": [torch.nn.Parameter(torch.randn(size, generator=generator).to(device=device, dtype=dtype))
                        for size in sizes]}
            for sizes in spec["groups"]
        ]
        optimizers.append(RecordingSGD(groups, lr=float(spec.get("lr", 0.1))))
    return optimizers


def all_params(optimizer: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _set_grads(optimizer: torch.optim.Optimizer, values: list[Json], dtype: str) -> None:
    for param, value in zip(all_params(optimizer), values):
        if value is None:
            param.grad = None
        else:
            # Straight to the dtype asked for: from Python floats that rounds exactly as through float64 would.
            grad = torch.tensor(value, dtype=getattr(torch, dtype)).reshape(param.shape)
            param.grad = grad.to(device=param.device)


def _scale_op(scaler: Any, op: dict[str, Json], device: str = "cpu") -> Json:
    dtype = getattr(torch, op.get("dtype", "float16"))
    tensors = [torch.tensor(v, dtype=dtype, device=device) for v in op["values"]]
    container = op.get("container", "tensor")
    given: Any = tensors[0] if container == "tensor" else (list(tensors) if container == "list" else tuple(tensors))
    result = scaler.scale(given)
    items = [result] if container == "tensor" else result
    return {
        "container": type(result).__name__,
        "items": [
            {"dtype": str(t.dtype).replace("torch.", ""), "values": tensor_values(t)}
            if isinstance(t, torch.Tensor)
            else {"dtype": type(t).__name__, "values": []}
            for t in items
        ],
    }


_DATA_PTR = torch.Tensor.data_ptr


def _unscale_op(scaler: Any, optimizer: RecordingSGD) -> Json:
    """``unscale_``'s effects: whether each gradient the harness handed in is still the parameter's
    gradient, same storage (in place), and the values those very tensors hold afterwards."""
    before = [param_grad(p) for p in all_params(optimizer)]
    pointers = read_plainly(lambda: [None if g is None or not is_plain_tensor(g) else _DATA_PTR(g) for g in before])
    scaler.unscale_(optimizer)
    after = [param_grad(p) for p in all_params(optimizer)]
    in_place = read_plainly(lambda: all(b is a and (b is None or (is_plain_tensor(a) and _DATA_PTR(a) == ptr))
                                        for b, a, ptr in zip(before, after, pointers)))
    return {"in_place": in_place, "grads": [None if g is None else tensor_values(g) for g in before]}


def _step_op(scaler: Any, optimizer: RecordingSGD) -> Json:
    """``step``'s effects: whether the parameters changed (the optimizer stepped) and what it returned."""
    before = str(tensors_values(all_params(optimizer)))
    returned = scaler.step(optimizer)
    changed = str(tensors_values(all_params(optimizer))) != before
    return {"called": changed, "returned": float(returned) if type(returned) is float else None}


def grads_of(optimizer: torch.optim.Optimizer) -> list[Json]:
    return [None if param_grad(p) is None else tensor_values(param_grad(p)) for p in all_params(optimizer)]


def observe(scaler: Any) -> dict[str, Json]:
    tracker = getattr(scaler, "get_growth_tracker", None) or scaler._get_growth_tracker  # torch's is private
    return {"scale": float(scaler.get_scale()), "tracker": int(tracker())}


def run_scaler_ops(args: dict[str, Json], make_scaler: Callable[..., Any], root: Path | None = None) -> list[Json]:
    """Apply ``args["ops"]`` to a scaler built by ``make_scaler`` and return one result per op.

    Op kinds: ``new`` (kwargs), ``grads`` (opt, values, dtype), ``scale`` (values, dtype,
    container), ``unscale_`` (opt), ``step`` (opt), ``update`` (new_scale), ``clip``
    (opt, max_norm), ``observe``, ``params`` (opt), ``grads_of`` (opt),
    ``state_dict``, ``load_state_dict`` (state).
    """
    seed_cpu(0)
    optimizers = build_optimizers(args["world"])
    scaler: Any = None
    results: list[Json] = []

    def apply(op: dict[str, Json]) -> Json:
        nonlocal scaler
        kind = op["op"]
        opt = optimizers[op["opt"]] if "opt" in op else None
        if kind == "new":
            scaler = make_scaler(**op.get("kwargs", {}))
            return None
        if kind == "grads":
            _set_grads(opt, op["values"], op.get("dtype", "float32"))
            return None
        if kind == "params":
            return [tensor_values(p) for p in all_params(opt)]
        if kind == "grads_of":
            return grads_of(opt)
        if kind == "clip":
            return float(torch.nn.utils.clip_grad_norm_(all_params(opt), op["max_norm"]))
        if kind == "scale":
            return _scale_op(scaler, op, args["world"].get("device", "cpu"))
        if kind == "unscale_":
            return _unscale_op(scaler, opt)
        if kind == "step":
            return _step_op(scaler, opt)
        if kind == "update":
            scaler.update(op.get("new_scale"))
            return None
        if kind == "observe":
            return observe(scaler)
        if kind == "state_dict":
            return {k: v for k, v in scaler.state_dict().items()}
        if kind == "load_state_dict":
            scaler.load_state_dict(dict(op["state"]))
            return None
        raise ValueError(f"unknown op {kind!r}")

    for op in args["ops"]:
        if scaler is None and op["op"] not in ("new", "grads", "params", "grads_of", "clip") and results:
            results.append({"error": {"type": "RuntimeError", "mro": ["RuntimeError"], "trace": "",
                                      "message": "no scaler: the constructor call above failed"}})
            continue
        results.append(guarded(lambda: apply(op), root))
    return results


# --------------------------------------------------------------------------- answers


def read_answers(submission: Submission) -> dict[str, Json]:
    """The Quick Check answers, read as literal data from answers.py (never imported, never run)."""
    path = submission.root / CONTRACT_FILES["answers"]
    try:
        source = path.read_bytes()[: 2**20].decode("utf-8") if path.is_file() else None
    except UnicodeDecodeError as exc:
        raise SubmissionFault(english("file.not_utf8", file=path.name, byte=exc.start)) from None
    return quick_check.parse_answers(source)


# --------------------------------------------------------------------------- dispatch


def torch_scaler(**kwargs: Any) -> torch.amp.GradScaler:
    """The reference: torch's own scaler on CPU, initialised eagerly.

    torch creates its scale tensor at the first ``scale()`` call; the contract's
    scaler works without one, so the reference is initialised up front.
    """
    scaler = torch.amp.GradScaler("cpu", **kwargs)
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
    return scaler


def run_scenario(name: str, args: dict[str, Json], submission: Submission) -> Json:
    """Run scenario ``name`` against ``submission`` (see :mod:`checks.runners.registry`); raise SubmissionFault if it cannot load.

    The scenarios of :mod:`checks.runners.probes` and :mod:`checks.runners.gpu_runs` are there once those
    modules are imported (the sandbox preloads both; the local fixture imports probes).
    """
    return registry.run(name, args, submission)


registry.register("scaler_ops", lambda args, sub: run_scaler_ops(args, sub.attribute("loss_scaler"), sub.root))
registry.register("answers", lambda args, sub: read_answers(sub))
