"""GPU scenarios (Part 4): plain data in, plain data out, like :mod:`checks.runners.harness`.

The scenarios the GPU checks (``checks/test_gpu.py``) run in a student process:

* ``gpu_train_fp32`` / ``gpu_train``: one training run of the speed workload (:func:`run_train`),
  in float32 with TF32 off (its process imports no submission file) or through the student's
  ``amp_step`` + ``torch.amp.GradScaler``; the reply is the trained weights, nothing else;
* ``gpu_underflow``: the underflow task of :func:`checks.runners.probes.run_underflow` on the device,
  through the student's ``amp_step`` with torch's ``GradScaler``; the reply is the final weight;
* ``gpu_scaler_ops``: :func:`checks.runners.harness.run_scaler_ops` on CUDA tensors, against the
  student's ``ToyLossScaler`` (the judge compares with ``GradScaler("cuda")``).

What grades 4.1 and 4.2 is measured outside the student's process: the judge computes every
loss itself, from the weights a run copies out (:func:`checks.judge.gpu_losses.evaluation_loss` on its own
evaluation batch, :func:`checks.runners.probes.underflow_loss`), and times 4.1 by the wall time of each call's
round trip, the same way for the fp32 baseline and the AMP run (see ``checks/test_gpu.py``).
Neither the value ``amp_step`` returns nor anything the student's process timed or counted is
read, and nothing here times anything: the benchmark's in-process timings and loss curves
(``benchmarks/gpu_timing.py``) run in the benchmark's own, trusted process.

Every scenario takes ``args["device"]``: ``"cuda"`` for the real thing, ``"cpu"`` for
the *dry mode* (``AMP_GPU_DRY=1``) that runs the same code paths on the CPU with tiny
sizes (CPU autocast, float16 or bfloat16) and without any speed claim.

Grader faults: a device failure (CUDA could not start, out of memory, "CUDA error") raised
outside the student's own frames -- building the synthetic task, moving data to the GPU,
reading the device's properties -- is probably the grader machine's failure, not the student's:
:func:`run_scenario` answers ``{"grader_fault": ...}`` with the full traceback.  That is a claim
made in the student's process (whose code can raise any message from any file name), so the
judge decides it itself: it reruns the grader's side of the scenario without student code on the
same device (``gpu_canary``, :func:`run_canary`); only if that fails too is the submission marked
"could not be graded" (see ``checks/test_gpu.py`` and ``autograder.gpu.grading``).

Fork safety: nothing here touches CUDA at import time.  The sandbox's zygote
preloads this module and forks student processes from it; a process that initialised
CUDA before forking cannot use it in the child.  Only torch and the standard library
are imported (no pytest), as for the harness.

What the judge computes 4.1's losses with, from the weights a run copies out, is not here: it is the judge's
(:mod:`checks.judge.gpu_losses`), never loaded in a student process.

Why one file past 400 lines: it is everything the student process runs for the GPU part (preflight, training runs,
underflow, dry mode, the canary), preloaded into the zygote as one module; splitting it would add modules the
sandbox must preload and keep in step.
"""

from __future__ import annotations

import base64
import math
import os
import platform
import resource
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from checks.runners import harness, plain, probes, registry
from checks.runners.optimizers import PlainSGD
from checks.gpu_mode import dry_from_env

Json = Any

#: The timed workload on a GPU: a matmul-bound MLP sized for tensor cores (every dimension a
#: multiple of 64), trained with Adam.  ~0.37 TFLOP of matmuls per step on a large batch: ~7 ms in
#: fp32 (TF32 off) on an H100, a few ms with fp16 autocast.  Few parameters for its work (2.2 M,
#: 8.9 MB): the grader copies every weight out of the student's process after each timed run and
#: computes the loss itself (see :func:`run_train`), within the sandbox's 16 MiB reply limit, and
#: the copy-out adds the same small cost to the fp32 and the AMP round trips.
SPEED_CUDA: dict[str, Json] = {
    "width": 1024, "depth": 2, "d_out": 128, "teacher_width": 256, "batch": 32768, "pool": 8,
    "steps": 150, "warmup": 5, "repeats": 3, "lr": 2e-4, "seed": 0,
    "dtype": "float16", "window": 5, "target_fraction": 0.8, "scaler_kwargs": {},
}
#: The dry mode: the same code on the CPU, tiny.
SPEED_DRY: dict[str, Json] = {
    **SPEED_CUDA, "width": 64, "depth": 2, "d_out": 8, "teacher_width": 8, "batch": 64, "pool": 4,
    "steps": 40, "warmup": 2, "repeats": 2, "lr": 2e-3,
}
#: Rows of the judge's own evaluation batch (:mod:`checks.judge.gpu_losses`: fresh inputs of the task's distribution,
#: drawn on the judge's CPU from a secret never sent to the student's process), and of the teacher's calibration.
EVAL_ROWS = 1024


class GraderFault(RuntimeError):
    """The grader's side of a GPU check failed (raised in the judge): the submission is not graded."""


def dry_mode() -> bool:
    """True when ``AMP_GPU_DRY`` asks for the CPU dry run of the GPU checks (see :mod:`checks.gpu_mode`)."""
    return dry_from_env()


def device_type(device: str) -> str:
    """``torch.autocast``'s device_type for a device string ("cuda:0" -> "cuda")."""
    return torch.device(device).type


def is_cuda(device: str) -> bool:
    return device_type(device) == "cuda"


def speed_config(device: str, **overrides: Json) -> dict[str, Json]:
    """The speed workload for ``device`` (CUDA sizes or the tiny dry ones), with overrides."""
    base = SPEED_CUDA if is_cuda(device) else SPEED_DRY
    return {**base, "device": device, **overrides}


# --------------------------------------------------------------------------- device facts


def disable_tf32() -> dict[str, Json]:
    """Make float32 matmuls true float32 (no TF32 tensor cores) and say what is now set.

    ``torch.set_float32_matmul_precision("highest")`` keeps the legacy ``allow_tf32``
    flag and the newer ``fp32_precision`` setting consistent (reading one after setting
    the other inconsistently raises in torch >= 2.9), so only that call is used.  The
    model has no convolutions, so cuDNN's TF32 flag does not matter.
    """
    torch.set_float32_matmul_precision("highest")
    state: dict[str, Json] = {"float32_matmul_precision": torch.get_float32_matmul_precision(), "tf32": False}
    try:
        state["cuda_matmul_fp32_precision"] = str(torch.backends.cuda.matmul.fp32_precision)
    except (AttributeError, RuntimeError):  # older torch: no new-style setting
        pass
    state["text"] = "TF32 off for float32 matmuls (torch.set_float32_matmul_precision('highest'))"
    return state


def device_info(device: str) -> dict[str, Json]:
    """Name and facts of ``device`` (initialises CUDA when it is a CUDA device)."""
    info: dict[str, Json] = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda}
    if is_cuda(device):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), sms=props.multi_processor_count)
    else:
        info.update(name=f"CPU ({platform.processor() or platform.machine()}, dry mode)",
                    threads=torch.get_num_threads())
    return info


def synchronize(device: str) -> None:
    if is_cuda(device):
        torch.cuda.synchronize(torch.device(device))


def torch_scaler_factory(device: str, enabled: bool = True) -> Callable[..., torch.amp.GradScaler]:
    """Makes ``torch.amp.GradScaler(device_type)`` initialised eagerly on ``device`` (see harness.torch_scaler)."""

    def make(**kwargs: Json) -> torch.amp.GradScaler:
        scaler = torch.amp.GradScaler(device_type(device), enabled=enabled, **kwargs)
        if enabled:
            scaler._lazy_init_scale_growth_tracker(torch.device(device))
        return scaler

    return make


# --------------------------------------------------------------------------- the speed workload


def _teacher_generator(seed: int) -> torch.Generator:
    """The CPU generator of the teacher and the target scale.

    Apart from the device generator that draws the training inputs (another stream even on the CPU),
    so that the judge can rebuild the teacher on its CPU without CUDA, whatever the device.
    """
    return torch.Generator().manual_seed((int(seed) * 7919 + 104729) % 2**62)


def teacher(cfg: dict[str, Json]) -> tuple[torch.Tensor, torch.Tensor, torch.Generator]:
    """The teacher ``tanh(x A) B / scale`` on the CPU (A, B / scale) and the generator, positioned after it."""
    generator = _teacher_generator(int(cfg["seed"]))
    d_in, hidden, d_out = int(cfg["width"]), int(cfg["teacher_width"]), int(cfg["d_out"])
    a = torch.randn(d_in, hidden, generator=generator) / math.sqrt(d_in)
    b = torch.randn(hidden, d_out, generator=generator) / math.sqrt(hidden)
    calibration = torch.randn(EVAL_ROWS, d_in, generator=generator)
    scale = (torch.tanh(calibration @ a) @ b).std()
    return a, b / scale, generator


class SyntheticTask:
    """Regression onto a random teacher ``tanh(x A) B``: a fixed pool of batches on the device.

    Everything is drawn from ``cfg["seed"]`` and built before any training, so every run (fp32 or
    AMP, in any process) sees the same batches, and no data is made or copied inside the training
    loop.  Step ``i`` uses batch ``i % pool``.  The teacher is drawn on the CPU (see :func:`teacher`),
    the inputs on the device.
    """

    def __init__(self, cfg: dict[str, Json]) -> None:
        device = cfg["device"]
        a, b, _ = teacher(cfg)
        a, b = a.to(device), b.to(device)
        generator = torch.Generator(device=device).manual_seed(int(cfg["seed"]))
        d_in = int(cfg["width"])
        self.inputs = [torch.randn(int(cfg["batch"]), d_in, generator=generator, device=device)
                       for _ in range(int(cfg["pool"]))]
        self.targets = [torch.tanh(x @ a) @ b for x in self.inputs]
        self.bytes = sum(t.numel() * t.element_size() for t in self.inputs + self.targets)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        index = step % len(self.inputs)
        return self.inputs[index], self.targets[index]


def build_model(cfg: dict[str, Json]) -> torch.nn.Sequential:
    """The MLP ``width -> width x depth -> d_out`` (ReLU), float32, initialised on the CPU from the seed
    (so the judge can build the same initial model) and then moved to the device."""
    harness.seed_cpu(int(cfg["seed"]) + 1)
    width, depth, d_out = int(cfg["width"]), int(cfg["depth"]), int(cfg["d_out"])
    sizes = [width] * (depth + 1) + [d_out]
    layers: list[torch.nn.Module] = []
    for index, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if index + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(cfg["device"])


def learning_rate(cfg: dict[str, Json]) -> float:
    """Adam's rate: ``cfg["lr"]`` at width 1024, scaled by sqrt(1024 / width) (tuned at 64-2048)."""
    return float(cfg["lr"]) * math.sqrt(1024 / int(cfg["width"]))


# --------------------------------------------------------------------------- the graded training run (4.1)
#
# What 4.1 grades comes from outside the student's process: the judge times the round trip of each
# ``gpu_train`` call and computes the loss of the weights the call copies out (see test_gpu.py).
# The student's process only trains and copies the weights out; nothing it measures is read.


def _copy_out_weights(params: list[torch.nn.Parameter]) -> "list[str] | str":
    """The exact float32 values of ``params``, each as base64 of its bytes; or a note saying why not.

    The same rules as :func:`checks.runners.harness.copy_out_params` (exact tensor types, read with overrides
    and dispatch modes disabled), in a compact encoding: a JSON list of floats would be ~6x larger
    than the sandbox's reply limit for the CUDA workload.  The judge decodes them with
    :func:`checks.judge.gpu_losses.decode_weights` and computes the loss itself
    (:func:`checks.judge.gpu_losses.evaluation_loss`).
    """
    out: list[str] = []
    for param in params:
        if not harness.is_plain_tensor(param):
            return f"not a plain tensor: a {type(param).__name__[:80]}"

    def read() -> None:
        for param in params:
            flat = plain._TO(plain._RESHAPE(plain._DETACH(param), (-1,)), "cpu", torch.float32)
            out.append(base64.b64encode(_NUMPY(flat).tobytes()).decode("ascii"))

    plain.read_plainly(read)
    return out


_NUMPY = torch.Tensor.numpy  # bound at import, before any student code runs


def run_train(args: dict[str, Json], amp_step: Callable[..., Any] | None, root: Path | None = None) -> dict[str, Json]:
    """One training run of the speed workload; the judge times its round trip.

    Args: the keys of :data:`SPEED_CUDA` plus ``device``; ``amp_step`` None trains in plain float32
    (TF32 off: the ``gpu_train_fp32`` scenario, whose process imports no submission file), otherwise
    through ``amp_step`` with ``torch.amp.GradScaler`` (float16) or a disabled one (bfloat16).

    Returns ``ok`` (None) or ``error`` (the student's exception) and ``weights``: the model's
    parameters after the run, copied out as plain data (:func:`_copy_out_weights`).  What
    ``amp_step`` returns is not used, nor read: a wrong return value is Task 2's row 2.8, not this
    part's.  Nothing here is timed: in-process times are the student's to fake.
    """
    cfg = speed_config(args.get("device", "cuda"), **{k: v for k, v in args.items() if k != "device"})
    device = cfg["device"]
    previous = torch.get_float32_matmul_precision()
    disable_tf32()
    try:
        task = SyntheticTask(cfg)
        model = build_model(cfg)
        params = list(model.parameters())
        optimizer = torch.optim.Adam(params, lr=learning_rate(cfg))
        dtype = getattr(torch, cfg["dtype"])
        scaler = None
        if amp_step is not None:  # float16 needs loss scaling; bfloat16 has float32's range
            scaler = torch_scaler_factory(device, enabled=dtype == torch.float16)(**cfg.get("scaler_kwargs", {}))
        loss_fn = torch.nn.functional.mse_loss
        kind = device_type(device)

        def train() -> None:
            for step in range(int(cfg["steps"])):
                inputs, targets = task.batch(step)
                if amp_step is None:
                    optimizer.zero_grad(set_to_none=True)
                    loss_fn(model(inputs), targets).backward()
                    optimizer.step()
                else:
                    amp_step(model, inputs, targets, loss_fn, optimizer, scaler, device_type=kind, dtype=dtype)
            synchronize(device)

        outcome = harness.guarded(train, root)
        return {**outcome, "weights": _copy_out_weights(params)}
    finally:
        torch.set_float32_matmul_precision(previous)


# --------------------------------------------------------------------------- underflow and scaler ops


def underflow_args(device: str, **overrides: Json) -> dict[str, Json]:
    """The underflow task of the hidden CPU check, on ``device``."""
    return {"device": device, "device_type": device_type(device), "steps": 200,
            "scaler_kwargs": {"growth_interval": 20}, **overrides}


def run_gpu_underflow(args: dict[str, Json], amp_step: Callable[..., Any] | None,
                      root: Path | None = None) -> dict[str, Json]:
    """The underflow task (:func:`checks.runners.probes.underflow_data`) on ``args["device"]``: with ``amp_step``
    through ``GradScaler(device)``, without it the unscaled float16 baseline.

    Returns ``ok``/``error``, ``final_weight``, the model's weight after training copied out as plain
    data: the judge measures the final loss from it (:func:`checks.runners.probes.underflow_loss`), and
    ``weights``, the weight after each step: the judge checks that each follows from the one before by an
    AMP step (:func:`checks.judge.gpu_reference.underflow_steps`).  What ``amp_step`` returns is not read
    (it is row 2.8's, not this part's).
    """
    device = args.get("device", "cuda")
    kind = device_type(device)
    x, y = probes.underflow_data(args)
    x, y = x.to(device), y.to(device)
    model = torch.nn.Linear(x.shape[1], 1, bias=False).to(device)
    torch.nn.init.zeros_(model.weight)
    weight = model.weight
    optimizer = PlainSGD(model.parameters(), lr=float(args.get("lr", 0.25)))
    scaler = torch_scaler_factory(device)(**args.get("scaler_kwargs", {})) if amp_step is not None else None
    loss_fn = torch.nn.functional.mse_loss
    weights: list[Json] = []

    def train() -> None:
        for _ in range(int(args.get("steps", 200))):
            if amp_step is None:
                optimizer.zero_grad()
                with torch.autocast(device_type=kind, dtype=torch.float16):
                    loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
            else:
                amp_step(model, x, y, loss_fn, optimizer, scaler, device_type=kind, dtype=torch.float16)
            weights.append(harness.copy_out_tensor(weight))
        synchronize(device)

    outcome = harness.guarded(train, root)
    return {**outcome, "final_weight": harness.copy_out_tensor(weight), "weights": weights,
            "device_info": device_info(device)}


def torch_scaler_ops(args: dict[str, Json]) -> list[Json]:
    """What ``torch.amp.GradScaler`` on ``args["world"]["device"]`` does for the ops (the reference)."""
    return harness.run_scaler_ops(args, torch_scaler_factory(args["world"].get("device", "cpu")))


# --------------------------------------------------------------------------- preflight


def _entries(folder: str) -> int:
    try:
        return len(os.listdir(folder))
    except OSError:
        return -1


def run_preflight(args: dict[str, Json]) -> dict[str, Json]:
    """What a student process sees of the GPU (no student code runs; see ``autograder.gpu.preflight``).

    Args: ``device`` ("cuda", or "cpu" in dry mode), ``folders`` (path -> entries the trusted
    side sees: each must be as full here), ``nodes`` (device nodes to open read-write).
    """
    soft_as = resource.getrlimit(resource.RLIMIT_AS)[0]
    bad_fork = getattr(torch.cuda, "_is_in_bad_fork", lambda: False)
    report: dict[str, Json] = {
        "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
        "rlimit_as": None if soft_as == resource.RLIM_INFINITY else soft_as,
        "hidden_folders": sorted(path for path, size in args.get("folders", {}).items() if _entries(path) < size),
        "nodes": {node: os.access(node, os.R_OK | os.W_OK) for node in args.get("nodes", [])},
        # Forked from a zygote that had initialised CUDA, this process could not use the GPU at all.
        "cuda_initialized_at_fork": bool(torch.cuda.is_initialized() or bad_fork()),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
    }
    device = args.get("device", "cuda")
    if not is_cuda(device):
        return report
    cuda: dict[str, Json] = {"available": bool(torch.cuda.is_available())}
    try:  # even when is_available() says no, the first allocation gives the driver's own reason
        x = torch.ones(256, 256, device=device)
        cuda["matmul_ok"] = float((x @ x).sum()) == 256.0 ** 3
        cuda["info"] = device_info(device)
        cuda["uuid"] = str(getattr(torch.cuda.get_device_properties(torch.device(device)), "uuid", ""))
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the preflight explains it
        cuda["error"] = f"{type(exc).__name__}: {exc}"[:1000]
    report["cuda"] = cuda
    return report


# --------------------------------------------------------------------------- dispatch


def run_canary(args: dict[str, Json]) -> dict[str, Json]:
    """The grader's side of scenario ``args["scenario"]`` with ``args["args"]``, and no student code: in a process
    that imports no submission file, after a student process claimed a device failure (``{"grader_fault": ...}``).
    ``{"ok": None}`` when it ran: the device works, and the failure was the submission's.  The judge decides from
    this, never from the claim (see ``checks/test_gpu.py``)."""
    name, given = args["scenario"], args["args"]
    try:
        if name in ("gpu_train", "gpu_train_fp32"):
            done = run_train(given, None)
        elif name == "gpu_underflow":
            done = run_gpu_underflow(given, None)
        elif name == "gpu_scaler_ops":
            done = {"ok": torch_scaler_ops(given)}
        else:
            raise ValueError(f"no canary for scenario {name!r}")
        if "ok" not in done:
            raise RuntimeError(f"the grader's side failed without student code: {str(done)[:1000]}")
    except Exception as exc:  # noqa: BLE001 - no student code ran: any failure here is the grader's
        return grader_fault(exc)
    return {"ok": None}


def grader_fault(exc: BaseException) -> dict[str, Json]:
    """The reply for a failure of the grader's side: the full traceback, for staff only."""
    trace = "".join(traceback.format_exception(exc))[-8000:]
    return {"grader_fault": {"type": type(exc).__name__, "message": str(exc)[:2000], "trace": trace}}


def run_scenario(name: str, args: dict[str, Json], submission: harness.Submission) -> Json:
    """Run GPU scenario ``name`` against ``submission`` (registered with :mod:`checks.runners.registry`).

    A device failure outside the student's frames answers ``{"grader_fault": ...}`` (see the
    module's docstring): a claim the judge checks with ``gpu_canary`` (:func:`run_canary`), never a verdict;
    the student's own exceptions are data, as everywhere else.
    """
    root = submission.root
    try:
        if name == "gpu_preflight":
            return run_preflight(args)
        if name == "gpu_canary":  # its process imports no submission file
            return run_canary(args)
        if name == "gpu_scaler_ops":
            return harness.run_scaler_ops(args, submission.attribute("loss_scaler"), root)
        if name == "gpu_train_fp32":  # the fp32 baseline: its process imports no submission file
            return run_train(args, None, root)
        if name == "gpu_train":
            return run_train(args, submission.attribute("amp_step"), root)
        if name == "gpu_underflow":
            return run_gpu_underflow(args, submission.attribute("amp_step"), root)
    except harness.GraderSideError as exc:
        return grader_fault(exc.__cause__ or exc)
    except harness.SubmissionFault:
        raise
    except Exception as exc:
        if harness.is_device_failure(exc) and not harness.submission_frames(exc, root):
            return grader_fault(exc)
        raise
    raise ValueError(f"unknown scenario {name!r}")


registry.register_family("gpu_", run_scenario)
