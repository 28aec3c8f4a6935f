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
from typing import Any, Callable

import torch

from checks.runners import ops, quick_check, registry
from checks.runners.plain import (is_plain_tensor, param_grad, tensor_facts, tensor_values,  # noqa: F401 - probes'
                                  tensors_values)
from checks.words import Spoken, english, ending_with, record_of

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


def stopped(exc: BaseException) -> Spoken:
    """The fault of a scenario that ``exc`` ended outside any guarded call (a ``SystemExit`` from the student's code):
    the student processes' message, at most 2,000 characters."""
    said = english("scenario.stopped", error=type(exc).__name__, message=exc)
    return said if len(said) <= 2000 else Spoken.of(said[:2000], said.record)


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
    """Format ``exc``'s traceback keeping only frames from the submission's own files (ending in a student
    process's message, rendered in any language, where ``exc`` was raised with one:
    :func:`checks.words.ending_with`)."""
    kept = submission_frames(exc, root)
    lines = [f'  {Path(f.filename).name}, line {f.lineno}, in {f.name}\n    {f.line or ""}' for f in kept]
    head = f"{type(exc).__name__}: {exc}"
    return ending_with("\n".join(lines + [head]) if lines else head, exc.args[0] if record_of(exc) else None)


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
    """Plain-data description of an exception raised by student code; one raised with a student process's message
    (a refusal in Task 1) has its record too (``"said"``: the judge renders it, :func:`checks.words.quoted`)."""
    error = {"type": type(exc).__name__, "mro": [cls.__name__ for cls in type(exc).__mro__],
             "message": str(exc)[:500], "trace": student_frames(exc, root)[-2000:]}
    record = record_of(exc)
    return error if record is None else {**error, "said": record}


# --------------------------------------------------------------------------- plain-data copy-out (checks.runners.plain)


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
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a student exception is data, SystemExit too (it ends a
        # real loop); a KeyboardInterrupt is the person at the keyboard stopping a local run, never an answer
        if is_device_failure(exc) and not submission_frames(exc, root):
            raise GraderSideError(f"{type(exc).__name__}: {exc}") from exc
        return {"error": describe_error(exc, root)}


# --------------------------------------------------------------------------- scaler ops


def run_scaler_ops(args: dict[str, Json], make_scaler: Callable[..., Any], root: Path | None = None) -> list[Json]:
    """Apply ``args["ops"]`` to a scaler built by ``make_scaler`` and return one result per op.

    The ops and what each one does are the table :data:`checks.runners.ops.OPS`.
    """
    seed_cpu(0)
    scene = ops.Scene(ops.build_optimizers(args["world"]), make_scaler, args["world"].get("device", "cpu"))
    results: list[Json] = []

    def apply(op: dict[str, Json]) -> Json:
        opt = scene.optimizers[op["opt"]] if "opt" in op else None
        if op["op"] not in ops.OPS:
            raise ValueError(f"unknown op {op['op']!r}")
        return ops.OPS[op["op"]].run(scene, op, opt)

    for op in args["ops"]:
        entry = ops.OPS.get(op["op"])
        if scene.scaler is None and (entry is None or entry.needs_scaler) and results:
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
